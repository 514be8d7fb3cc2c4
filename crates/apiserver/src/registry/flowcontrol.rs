//! flowcontrol.apiserver.k8s.io FlowSchemas and PriorityLevelConfigurations, the configuration of
//! API Priority and Fairness ([`crate::flowcontrol`]). Upstream 1.28 serves v1beta3 (preferred,
//! stored) and v1beta2; v1beta2 differs only in naming a limited level's shares
//! `assuredConcurrencyShares` where v1beta3 says `nominalConcurrencyShares`.
//!
//! The schemas and shape checks are `k8s-openapi`'s v1 types (the crate no longer has the beta
//! versions; their fields are the same as v1beta3's).

use jiff::Timestamp;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use serde_json::{Value, json};

use super::{Conversion, Generation, Kind, Reset, Strategy, Subresource};
use crate::table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, get, name_cell, plain, s};
use api::field::FieldError;

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The flowcontrol kinds: v1beta3 (preferred) first.
pub(super) fn kinds() -> Vec<Kind> {
    let fs = |version: &str| {
        let mut k = Kind::of::<FlowSchema>()
            .subresources(&[Subresource::Status])
            .strategy(FlowControlStrategy(flow_schema_defaults))
            .printer(Printer::Columns {
                columns: flow_schema_columns,
                row: flow_schema_row,
            });
        k.version = version.into();
        k.typecheck = Some(decode_as_v1::<FlowSchema>);
        k
    };
    let pl = |version: &str| {
        let mut k = Kind::of::<PriorityLevelConfiguration>()
            .subresources(&[Subresource::Status])
            .strategy(FlowControlStrategy(priority_level_defaults))
            .printer(Printer::Columns {
                columns: priority_level_columns,
                row: priority_level_row,
            });
        k.version = version.into();
        k.typecheck = Some(decode_as_v1::<PriorityLevelConfiguration>);
        k
    };
    vec![
        fs("v1beta3"),
        pl("v1beta3"),
        fs("v1beta2").view_of(GROUP, "flowschemas", Same),
        pl("v1beta2").view_of(GROUP, "prioritylevelconfigurations", V1beta2Shares),
    ]
}

/// Upstream's `pkg/registry/flowcontrol/{flowschema,prioritylevelconfiguration}/strategy.go`:
/// the generation moves with the spec, and a status write keeps the stored metadata and spec.
struct FlowControlStrategy(fn(&mut Value));

impl Strategy for FlowControlStrategy {
    fn defaults(&self, obj: &mut Value) {
        (self.0)(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::meta::validate_cluster_scoped(obj)
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }

    fn status_resets(&self) -> &'static [Reset] {
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
}

/// Checks a body decodes as the v1 type does, whose fields the beta versions share (the type
/// itself accepts only its own `apiVersion`).
fn decode_as_v1<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<(), String> {
    let mut obj = obj.clone();
    if obj.get("apiVersion").is_some() {
        obj["apiVersion"] = json!(format!("{GROUP}/v1"));
    }
    T::deserialize(&obj).map(|_| ()).map_err(|e| e.to_string())
}

/// FlowSchemas read the same in both versions.
struct Same;

impl Conversion for Same {
    fn stored_to_view(&self, obj: Value) -> Value {
        obj
    }
    fn view_to_stored(&self, obj: Value) -> Value {
        obj
    }
}

/// v1beta2's `assuredConcurrencyShares` is v1beta3's `nominalConcurrencyShares`.
struct V1beta2Shares;

impl Conversion for V1beta2Shares {
    fn stored_to_view(&self, mut obj: Value) -> Value {
        super::conversion::rename(
            &mut obj,
            "spec.limited.nominalConcurrencyShares",
            "spec.limited.assuredConcurrencyShares",
        );
        obj
    }
    fn view_to_stored(&self, mut obj: Value) -> Value {
        super::conversion::rename(
            &mut obj,
            "spec.limited.assuredConcurrencyShares",
            "spec.limited.nominalConcurrencyShares",
        );
        obj
    }
}

/// Upstream's v1beta3 defaults: `matchingPrecedence` 1000.
fn flow_schema_defaults(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("matchingPrecedence").or_insert(json!(1000));
    }
}

/// Upstream's v1beta3 defaults: a limited level's shares 30 (also for 0), lendable 0, queuing
/// 64 queues of hands of 8, 50 long; an exempt level's shares and lendable 0.
fn priority_level_defaults(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(limited) = spec.get_mut("limited").and_then(Value::as_object_mut) {
        let shares = limited
            .get("nominalConcurrencyShares")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if shares == 0 {
            limited.insert("nominalConcurrencyShares".into(), json!(30));
        }
        limited.entry("lendablePercent").or_insert(json!(0));
        if let Some(queuing) = limited
            .get_mut("limitResponse")
            .and_then(|r| r.get_mut("queuing"))
            .and_then(Value::as_object_mut)
        {
            for (k, v) in [("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)] {
                let zero = queuing.get(k).and_then(Value::as_i64).unwrap_or(0) == 0;
                if zero {
                    queuing.insert(k.into(), json!(v));
                }
            }
        }
    }
    if spec.get("type").and_then(Value::as_str) == Some("Exempt") {
        let exempt = spec.entry("exempt").or_insert(json!({}));
        if let Some(exempt) = exempt.as_object_mut() {
            exempt.entry("nominalConcurrencyShares").or_insert(json!(0));
            exempt.entry("lendablePercent").or_insert(json!(0));
        }
    }
}

const FS_SPEC: &str = "io.k8s.api.flowcontrol.v1.FlowSchemaSpec";
const PL_SPEC: &str = "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationSpec";
const LIMITED: &str = "io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration";
const QUEUING: &str = "io.k8s.api.flowcontrol.v1.QueuingConfiguration";

fn flow_schema_columns() -> Vec<Column> {
    use crate::table::col;
    use Desc::{Field, Text};
    vec![
        NAME,
        col(
            "PriorityLevel",
            "string",
            0,
            Field(
                "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationReference",
                "name",
            ),
        ),
        col(
            "MatchingPrecedence",
            "string",
            0,
            Field(FS_SPEC, "matchingPrecedence"),
        ),
        col(
            "DistinguisherMethod",
            "string",
            0,
            Field(FS_SPEC, "distinguisherMethod"),
        ),
        AGE,
        col(
            "MissingPL",
            "string",
            0,
            Text("references a broken or non-existent PriorityLevelConfiguration"),
        ),
    ]
}

fn flow_schema_row(fs: &Value, now: Timestamp) -> Row {
    let method = match s(fs, &["spec", "distinguisherMethod", "type"]) {
        "" => "<none>",
        m => m,
    };
    let missing = get(fs, &["status", "conditions"])
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling"))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("?");
    plain(vec![
        name_cell(fs),
        json!(s(fs, &["spec", "priorityLevelConfiguration", "name"])),
        json!(
            get(fs, &["spec", "matchingPrecedence"])
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
        json!(method),
        age_cell(fs, now),
        json!(missing),
    ])
}

fn priority_level_columns() -> Vec<Column> {
    use crate::table::col;
    use Desc::Field;
    vec![
        NAME,
        col("Type", "string", 0, Field(PL_SPEC, "type")),
        col(
            "NominalConcurrencyShares",
            "string",
            0,
            Field(LIMITED, "nominalConcurrencyShares"),
        ),
        col("Queues", "string", 0, Field(QUEUING, "queues")),
        col("HandSize", "string", 0, Field(QUEUING, "handSize")),
        col(
            "QueueLengthLimit",
            "string",
            0,
            Field(QUEUING, "queueLengthLimit"),
        ),
        AGE,
    ]
}

fn priority_level_row(pl: &Value, now: Timestamp) -> Row {
    let none = || json!("<none>");
    let limited = get(pl, &["spec", "limited"]);
    let shares = limited
        .and_then(|l| {
            l.get("nominalConcurrencyShares")
                .or(l.get("assuredConcurrencyShares"))
        })
        .cloned()
        .unwrap_or_else(none);
    let queuing = limited.and_then(|l| l.pointer("/limitResponse/queuing"));
    let q = |k: &str| {
        if limited.is_none() {
            return none();
        }
        queuing.and_then(|q| q.get(k)).cloned().unwrap_or_else(none)
    };
    plain(vec![
        name_cell(pl),
        json!(s(pl, &["spec", "type"])),
        shares,
        q("queues"),
        q("handSize"),
        q("queueLengthLimit"),
        age_cell(pl, now),
    ])
}
