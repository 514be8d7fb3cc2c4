//! Server-side printing: `meta.k8s.io/v1` Tables, as upstream's printers produce them. This
//! module holds each kind's printer as data (its columns and row function), which the registry
//! names per kind; [`render`] turns objects into a Table with them.
//!
//! `kubectl get` asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever
//! columns the server sends, so the columns and cell formats here are upstream's
//! (pkg/printers/internalversion) for every served kind. Like upstream's server, every row carries
//! all cells, the `-o wide` ones (priority 1) included; kubectl hides those unless asked.

mod custom;
mod format;
pub mod render;

pub use custom::CustomColumn;
pub(crate) use format::*;

use jiff::Timestamp;
use serde_json::{Value, json};

/// The `includeObject` query parameter: how much of each object a row embeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A `PartialObjectMetadata` (upstream's default): enough for kubectl's `--show-labels` and
    /// name lookups without shipping whole objects.
    #[default]
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter's value; `None` for anything upstream rejects.
    pub fn parse(s: &str) -> Option<IncludeObject> {
        match s {
            "None" => Some(IncludeObject::None),
            "Metadata" | "" => Some(IncludeObject::Metadata),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }
}

/// One row's cells and, for finished pods, its row conditions.
pub type Row = (Vec<Value>, Option<Value>);

/// How a kind is printed by `kubectl get`.
#[derive(Clone)]
pub enum Printer {
    /// Upstream's fallback for kinds without a printer: Name and Created At.
    Default,
    /// A built-in printer: upstream's columns and a function filling one row's cells.
    Columns {
        /// The columns, in order.
        columns: fn() -> Vec<Column>,
        /// One object's row at a time (ages relative to it).
        row: fn(&Value, Timestamp) -> Row,
    },
    /// A CustomResourceDefinition version's `additionalPrinterColumns` after Name.
    Custom(Vec<CustomColumn>),
}

impl Printer {
    pub(crate) fn columns(&self) -> Vec<Column> {
        match self {
            Printer::Default => vec![
                NAME,
                col(
                    "Created At",
                    "date",
                    0,
                    Desc::Field(META, "creationTimestamp"),
                ),
            ],
            Printer::Columns { columns, .. } => columns(),
            Printer::Custom(_) => vec![NAME],
        }
    }

    pub(crate) fn row(&self, obj: &Value, now: Timestamp) -> Row {
        match self {
            Printer::Default => (
                vec![
                    name_cell(obj),
                    obj.pointer("/metadata/creationTimestamp")
                        .cloned()
                        .unwrap_or(Value::Null),
                ],
                None,
            ),
            Printer::Columns { row, .. } => row(obj, now),
            Printer::Custom(columns) => {
                let mut cells = vec![name_cell(obj)];
                cells.extend(columns.iter().map(|c| c.cell(obj, now)));
                plain(cells)
            }
        }
    }
}

/// A row without row conditions.
pub(crate) fn plain(cells: Vec<Value>) -> Row {
    (cells, None)
}

/// The Name cell.
pub(crate) fn name_cell(obj: &Value) -> Value {
    json!(s(obj, &["metadata", "name"]))
}

/// The Age cell.
pub(crate) fn age_cell(obj: &Value, now: Timestamp) -> Value {
    json!(since(obj.pointer("/metadata/creationTimestamp"), now))
}

/// Where a column's description comes from.
#[derive(Clone, Copy)]
pub enum Desc {
    /// A fixed text.
    Text(&'static str),
    /// Upstream's field doc: (component schema, property).
    Field(&'static str, &'static str),
}

/// One column of a built-in printer.
#[derive(Clone, Copy)]
pub struct Column {
    pub(crate) name: &'static str,
    pub(crate) ty: &'static str,
    pub(crate) format: &'static str,
    pub(crate) priority: u8,
    pub(crate) desc: Desc,
}

pub(crate) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A column without a format.
pub(crate) const fn col(name: &'static str, ty: &'static str, priority: u8, desc: Desc) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority,
        desc,
    }
}

/// Name.
pub(crate) const NAME: Column = Column {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    desc: Desc::Field(META, "name"),
};
/// Age.
pub(crate) const AGE: Column = col("Age", "string", 0, Desc::Field(META, "creationTimestamp"));
/// Containers of a workload's template (wide).
pub(crate) const CONTAINERS: Column = col(
    "Containers",
    "string",
    1,
    Desc::Text("Names of each container in the template."),
);
/// Images of a workload's template (wide).
pub(crate) const IMAGES: Column = col(
    "Images",
    "string",
    1,
    Desc::Text("Images referenced by each container in the template."),
);

#[cfg(test)]
mod tests;
