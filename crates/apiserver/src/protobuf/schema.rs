//! The message table the decoder walks: field numbers, JSON names and types of the Kubernetes
//! protobuf messages, generated from the `k8s-pb` crate by `tools/gen-protobuf-schema.py`.
//!
//! Keeping it as data (rather than compiled prost types) lets one generic walker turn any
//! supported kind into the same JSON a client would have sent, with upstream's field names.

use std::collections::HashMap;
use std::sync::LazyLock;

/// The generated table: message full name -> `[[tag, jsonName, type, repeated], ...]`.
const MESSAGES_JSON: &str = include_str!("messages.json");

/// What a field holds, as far as decoding is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FieldType {
    /// UTF-8 text.
    String,
    /// A signed 32-bit varint (negative values take ten bytes).
    Int32,
    /// A signed 64-bit varint.
    Int64,
    /// A varint 0 or 1.
    Bool,
    /// Opaque bytes: base64 in JSON, as Go marshals `[]byte`.
    Bytes,
    /// A little-endian IEEE 754 double.
    Double,
    /// An embedded message, by full name.
    Message(String),
    /// A `map<string, V>`: repeated `{1: key, 2: value}` entries.
    Map(Box<FieldType>),
}

impl FieldType {
    fn parse(s: &str) -> Self {
        match s {
            "string" => Self::String,
            "int32" => Self::Int32,
            "int64" => Self::Int64,
            "bool" => Self::Bool,
            "bytes" => Self::Bytes,
            "double" => Self::Double,
            other => match other.strip_prefix("map:") {
                Some(value) => Self::Map(Box::new(Self::parse(value))),
                None => Self::Message(other.to_string()),
            },
        }
    }
}

/// One field of a message.
#[derive(Debug, Clone)]
pub(super) struct Field {
    /// The protobuf field number.
    pub(super) tag: u32,
    /// The upstream JSON name; empty for a Go embedded struct whose fields are inlined.
    pub(super) json: String,
    /// The value type.
    pub(super) ty: FieldType,
    /// Whether the field is a list.
    pub(super) repeated: bool,
}

/// All messages, by full name (`api.apps.v1.Deployment`).
#[derive(Debug)]
pub(super) struct Schema {
    messages: HashMap<String, Vec<Field>>,
    /// Lowercased full name -> full name, for kinds with initialisms (`CSIDriver` vs `CsiDriver`).
    folded: HashMap<String, String>,
}

impl Schema {
    fn parse(text: &str) -> Result<Self, String> {
        let raw: HashMap<String, Vec<(u32, String, String, u8)>> =
            serde_json::from_str(text).map_err(|e| format!("embedded protobuf schema: {e}"))?;
        let mut messages = HashMap::with_capacity(raw.len());
        let mut folded = HashMap::with_capacity(raw.len());
        for (name, rows) in raw {
            let fields = rows
                .into_iter()
                .map(|(tag, json, ty, repeated)| Field {
                    tag,
                    json,
                    ty: FieldType::parse(&ty),
                    repeated: repeated != 0,
                })
                .collect();
            folded.insert(name.to_ascii_lowercase(), name.clone());
            messages.insert(name, fields);
        }
        Ok(Self { messages, folded })
    }

    /// The fields of a message, if the table has it.
    pub(super) fn message(&self, name: &str) -> Option<&[Field]> {
        self.messages.get(name).map(Vec::as_slice)
    }

    /// The message that carries `kind` of `apiVersion` (`apps/v1` `Deployment` ->
    /// `api.apps.v1.Deployment`). Options kinds (`DeleteOptions`, ...) are registered in every
    /// group version upstream, so they fall back to `meta.k8s.io/v1`'s messages.
    pub(super) fn message_for_kind(&self, api_version: &str, kind: &str) -> Option<&str> {
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        if group.is_empty() && version.is_empty() || kind.is_empty() {
            return None;
        }
        let package = match group {
            "" => format!("api.core.{version}"),
            "meta.k8s.io" => format!("apimachinery.pkg.apis.meta.{version}"),
            _ => {
                let short = group.split('.').next().unwrap_or(group);
                format!("api.{short}.{version}")
            }
        };
        let mut candidates = vec![format!("{package}.{kind}")];
        if kind.ends_with("Options") {
            candidates.push(format!("apimachinery.pkg.apis.meta.v1.{kind}"));
        }
        candidates.iter().find_map(|candidate| {
            self.folded
                .get(&candidate.to_ascii_lowercase())
                .map(String::as_str)
        })
    }
}

static SCHEMA: LazyLock<Result<Schema, String>> = LazyLock::new(|| Schema::parse(MESSAGES_JSON));

/// The embedded table, parsed on first use; an error only if the generated file is corrupt.
pub(super) fn schema() -> Result<&'static Schema, &'static str> {
    SCHEMA.as_ref().map_err(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_table_parses_and_is_closed() {
        let schema = schema().unwrap();
        for (name, fields) in &schema.messages {
            for field in fields {
                let mut ty = &field.ty;
                while let FieldType::Map(inner) = ty {
                    ty = inner;
                }
                if let FieldType::Message(target) = ty {
                    assert!(
                        schema.message(target).is_some(),
                        "{name}.{} -> {target}",
                        field.json
                    );
                }
            }
        }
    }

    #[test]
    fn json_names_follow_upstream() {
        let schema = schema().unwrap();
        let cases = [
            ("api.core.v1.PodSpec", 13, "hostIPC"),
            ("api.core.v1.PodStatus", 6, "podIP"),
            ("api.apps.v1.DeploymentStrategy", 1, "type"),
            ("api.core.v1.Container", 14, "imagePullPolicy"),
            ("api.core.v1.Volume", 2, ""),
            ("apimachinery.pkg.apis.meta.v1.ObjectMeta", 3, "namespace"),
        ];
        for (message, tag, want) in cases {
            let field = schema
                .message(message)
                .unwrap()
                .iter()
                .find(|f| f.tag == tag)
                .unwrap();
            assert_eq!(field.json, want, "{message} field {tag}");
        }
    }

    #[test]
    fn kinds_map_to_messages() {
        let schema = schema().unwrap();
        let cases = [
            ("apps/v1", "Deployment", Some("api.apps.v1.Deployment")),
            ("v1", "Pod", Some("api.core.v1.Pod")),
            ("v1", "Namespace", Some("api.core.v1.Namespace")),
            ("policy/v1", "Eviction", Some("api.policy.v1.Eviction")),
            ("autoscaling/v1", "Scale", Some("api.autoscaling.v1.Scale")),
            (
                "coordination.k8s.io/v1",
                "Lease",
                Some("api.coordination.v1.Lease"),
            ),
            (
                "meta.k8s.io/v1",
                "DeleteOptions",
                Some("apimachinery.pkg.apis.meta.v1.DeleteOptions"),
            ),
            (
                "v1",
                "DeleteOptions",
                Some("apimachinery.pkg.apis.meta.v1.DeleteOptions"),
            ),
            (
                "policy/v1",
                "DeleteOptions",
                Some("apimachinery.pkg.apis.meta.v1.DeleteOptions"),
            ),
            ("apps/v1", "Pod", None),
            ("v1", "Nope", None),
            ("v1", "ObjectMeta", None),
            ("", "Pod", None),
            ("v1", "", None),
        ];
        for (api_version, kind, want) in cases {
            assert_eq!(
                schema.message_for_kind(api_version, kind),
                want,
                "{api_version} {kind}"
            );
        }
    }
}
