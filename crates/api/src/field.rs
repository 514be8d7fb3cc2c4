//! Field errors, the unit of a 422 `Invalid` response.
//!
//! Mirrors upstream's `field.Error`: a path such as `spec.template.spec.containers[0].image`, a
//! type that becomes the cause's `reason` (`FieldValueRequired`, ...), the offending value and a
//! human detail. The API server turns a list of these into a `Status` with `details.causes`.

use serde_json::Value;
use std::fmt;

/// The kind of a field error; each maps to upstream's cause reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// A required field is missing.
    Required,
    /// A value is malformed or out of range.
    Invalid,
    /// A value is not one of the allowed ones.
    NotSupported,
    /// A value may not be set or changed.
    Forbidden,
    /// A value appears twice where it must be unique.
    Duplicate,
    /// A value is longer than allowed.
    TooLong,
    /// A list has more items than allowed.
    TooMany,
    /// A value refers to something that does not exist (e.g. a volume mount naming no volume).
    NotFound,
}

impl ErrorType {
    /// The `reason` of a `StatusCause`, as upstream names it.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::NotFound => "FieldValueNotFound",
        }
    }

    /// The leading words of the message, as upstream prints them.
    pub fn label(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::NotFound => "Not found",
        }
    }
}

/// One problem with one field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: ErrorType,
    /// The field's path, e.g. `spec.replicas` or `spec.template.spec.containers[0].image`.
    pub field: String,
    /// The offending value, shown for `Invalid`, `NotSupported` and `Duplicate`.
    pub value: Option<Value>,
    /// A sentence saying why (may be empty for `Required`).
    pub detail: String,
}

impl FieldError {
    /// A required field is missing.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Required,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// A value is invalid.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: Some(value),
            detail: detail.into(),
        }
    }

    /// A value is not among `allowed`.
    pub fn not_supported(field: impl Into<String>, value: Value, allowed: &[&str]) -> Self {
        let quoted: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
        Self {
            kind: ErrorType::NotSupported,
            field: field.into(),
            value: Some(value),
            detail: format!("supported values: {}", quoted.join(", ")),
        }
    }

    /// A value may not be set or changed.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Forbidden,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// A value appears twice.
    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self {
            kind: ErrorType::Duplicate,
            field: field.into(),
            value: Some(value),
            detail: String::new(),
        }
    }

    /// A value is too long.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self {
            kind: ErrorType::TooLong,
            field: field.into(),
            value: None,
            detail: format!("must have at most {max} bytes"),
        }
    }

    /// A value names something that does not exist.
    pub fn not_found(field: impl Into<String>, value: Value) -> Self {
        Self {
            kind: ErrorType::NotFound,
            field: field.into(),
            value: Some(value),
            detail: String::new(),
        }
    }

    /// The cause message without the field, e.g. `Invalid value: "x": must be ...`.
    pub fn message(&self) -> String {
        let mut out = self.kind.label().to_string();
        if let Some(v) = &self.value {
            out.push_str(": ");
            out.push_str(&v.to_string());
        }
        if !self.detail.is_empty() {
            out.push_str(": ");
            out.push_str(&self.detail);
        }
        out
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// Builds field paths as upstream prints them (`spec.containers[0].image`, `metadata.labels[app]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// A root path such as `spec` or `metadata`.
    pub fn new(root: &str) -> Self {
        Path(root.to_string())
    }

    /// `self.name`.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `self[i]`.
    pub fn index(&self, i: usize) -> Self {
        Path(format!("{}[{i}]", self.0))
    }

    /// `self[key]`.
    pub fn key(&self, key: &str) -> Self {
        Path(format!("{}[{key}]", self.0))
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Path> for String {
    fn from(p: Path) -> String {
        p.0
    }
}

impl From<&Path> for String {
    fn from(p: &Path) -> String {
        p.0.clone()
    }
}
