//! ConfigMaps and Secrets: data validated and counted; a Secret's `stringData` folded into
//! `data` by defaulting, its type fixed once created.

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::{
    registry::{Kind, Rules},
    table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, col, get, name_cell, plain, s},
};

/// The configmaps kind.
pub(super) fn config_map() -> Kind {
    Kind::of::<ConfigMap>()
        .short_names(&["cm"])
        .strategy(
            Rules::new()
                .validate(api::validation::config::validate_config_map)
                .immutable(api::validation::config::validate_immutable_data),
        )
        .printer(Printer::Columns {
            columns: config_map_columns,
            row: config_map_row,
        })
}

/// The secrets kind.
pub(super) fn secret() -> Kind {
    let mut kind = Kind::of::<Secret>();
    kind.typecheck = Some(secret_shape);
    kind.strategy(
        Rules::new()
            .defaults(api::defaults::secret)
            .validate(api::validation::config::validate_secret)
            .immutable(validate_secret_update),
    )
    .selectable_fields(&["type"])
    .printer(Printer::Columns {
        columns: secret_columns,
        row: secret_row,
    })
}

/// A Secret decodes as upstream's does: `data` values are base64, and a bad one is reported as
/// Go's decoder reports it.
fn secret_shape(obj: &Value) -> Result<(), String> {
    use base64::Engine as _;
    for v in get(obj, &["data"])
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.values())
    {
        let Some(text) = v.as_str() else { continue };
        if let Err(e) = base64::engine::general_purpose::STANDARD.decode(text) {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                base64::DecodeError::InvalidLength(len) => len,
                base64::DecodeError::InvalidPadding => text.len(),
            };
            return Err(format!("illegal base64 data at input byte {at}"));
        }
    }
    Secret::deserialize(obj)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn validate_secret_update(new: &Value, old: &Value) -> Vec<FieldError> {
    api::validation::config::validate_immutable_data(new, old)
}

/// How many keys `obj` holds under each of `fields`.
fn count(obj: &Value, fields: &[&str]) -> usize {
    fields
        .iter()
        .filter_map(|f| get(obj, &[f]).and_then(Value::as_object))
        .map(|m| m.len())
        .sum()
}

fn config_map_columns() -> Vec<Column> {
    vec![
        NAME,
        col(
            "Data",
            "string",
            0,
            Desc::Field("io.k8s.api.core.v1.ConfigMap", "data"),
        ),
        AGE,
    ]
}

fn config_map_row(obj: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(obj),
        json!(count(obj, &["data", "binaryData"])),
        age_cell(obj, now),
    ])
}

fn secret_columns() -> Vec<Column> {
    vec![
        NAME,
        col(
            "Type",
            "string",
            0,
            Desc::Field("io.k8s.api.core.v1.Secret", "type"),
        ),
        col(
            "Data",
            "string",
            0,
            Desc::Field("io.k8s.api.core.v1.Secret", "data"),
        ),
        AGE,
    ]
}

fn secret_row(obj: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(obj),
        json!(s(obj, &["type"])),
        json!(count(obj, &["data"])),
        age_cell(obj, now),
    ])
}
