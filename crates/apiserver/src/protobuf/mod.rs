//! Decodes Kubernetes protobuf request bodies into the JSON a client would have sent.
//!
//! kubectl's typed commands (`create deployment`, `run`, `drain`, `expose`, ...) send
//! `application/vnd.kubernetes.protobuf` bodies: the magic `k8s\0` then a `runtime.Unknown`
//! envelope holding apiVersion/kind and the object's protobuf bytes. Everything behind the
//! request decoder speaks `serde_json::Value`, so the body is turned into exactly that, walking
//! the wire format with the generated message table (`schema.rs`, `messages.json`).
//!
//! Rules, chosen to give what the same client would have sent as JSON:
//! - Go writes non-pointer numbers and bools even when zero, and upstream's JSON drops those
//!   (`omitempty`), so a zero or `false` is omitted, except in the fields that are pointers
//!   upstream, where it is a choice (`replicas: 0`, `runAsUser: 0`, `gracePeriodSeconds: 0`):
//!   [`POINTER_SCALARS`] lists them by JSON name. The protobuf itself cannot tell the two apart.
//! - Empty strings in non-repeated fields are omitted: Go writes every non-pointer string even
//!   when empty, and upstream's JSON drops them (`omitempty`). The few pointer strings where
//!   `""` means something (a PVC's `storageClassName: ""` disables dynamic provisioning) are kept.
//! - Embedded messages are kept even when empty (`strategy: {}`), as upstream's JSON does for
//!   non-pointer structs; `meta.v1.Time`/`MicroTime` sent as an empty message are Go's zero time
//!   and are omitted (upstream writes `null`), `RawExtension`/`FieldsV1` without bytes likewise.
//! - `IntOrString` becomes a number or a string, `Quantity` a string, `Time` RFC 3339,
//!   `MicroTime` RFC 3339 with microseconds, `Duration` Go's duration string (`1h0m0s`),
//!   `RawExtension`/`FieldsV1` the JSON they carry, `bytes` base64.
//! - Unknown fields are skipped; a non-repeated message field sent twice is merged (its byte
//!   strings concatenated), as protobuf specifies.

mod schema;
mod wire;

use base64::Engine as _;
use serde_json::{Map, Value};

use schema::{Field, FieldType, Schema};
use wire::{Reader, WireType};

/// The media type of Kubernetes protobuf bodies, as clients send it in `Content-Type`.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with, telling it apart from raw protobuf.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Messages nested deeper than this are refused rather than risk the stack on hostile input.
const MAX_DEPTH: usize = 64;

/// Why a protobuf body could not be decoded; the server answers 400 with this message.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body lacks the `k8s\0` prefix, so it is not a Kubernetes protobuf message.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    MissingMagic,
    /// The bytes break the wire format (truncated, bad varint, wrong wire type, ...).
    #[error("malformed protobuf body: {0}")]
    Malformed(String),
    /// The envelope names no kind, so there is no message to decode the object as.
    #[error("Object 'Kind' is missing in protobuf envelope")]
    MissingKind,
    /// The envelope's apiVersion/kind has no message in the table.
    #[error("no kind \"{kind}\" is registered for version \"{api_version}\"")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The envelope declares a content encoding (compression) that is not supported.
    #[error("unsupported protobuf content encoding \"{0}\"")]
    UnsupportedEncoding(String),
    /// The envelope declares its payload to be in a media type other than protobuf or JSON.
    #[error("unsupported embedded content type \"{0}\"")]
    UnsupportedContentType(String),
    /// A `RawExtension`, `FieldsV1` or JSON payload holds bytes that are not JSON.
    #[error("{context}: embedded data is not valid JSON: {source}")]
    InvalidJson {
        /// Which message held the bytes.
        context: String,
        /// The JSON parser's complaint.
        source: serde_json::Error,
    },
    /// The generated message table is broken (a build defect, not a client error).
    #[error("protobuf schema: {0}")]
    Schema(String),
}

impl ProtobufError {
    fn malformed(detail: impl Into<String>) -> Self {
        Self::Malformed(detail.into())
    }

    /// Prefixes a wire-level complaint with where it happened.
    fn at(self, message: &str, field: &str) -> Self {
        match self {
            Self::Malformed(detail) => Self::Malformed(format!("{message}.{field}: {detail}")),
            other => other,
        }
    }
}

/// Decodes a whole `k8s\0` + `runtime.Unknown` body into the JSON object the client meant,
/// with `apiVersion` and `kind` set from the envelope.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let schema = schema::schema().map_err(|e| ProtobufError::Schema(e.to_string()))?;
    Decoder { schema }.envelope(body, 0)
}

/// The parts of a `runtime.Unknown` envelope.
#[derive(Debug, Default)]
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
    content_type: String,
}

impl<'a> Envelope<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut out = Self::default();
        let mut reader = Reader::new(bytes);
        while !reader.is_empty() {
            let (tag, wire) = reader.key()?;
            let field = match tag {
                1 => "typeMeta",
                2 => "raw",
                3 => "contentEncoding",
                4 => "contentType",
                _ => {
                    reader.skip(tag, wire)?;
                    continue;
                }
            };
            if wire != WireType::Len {
                return Err(
                    ProtobufError::malformed(format!("wire type {wire:?}, want Len"))
                        .at("runtime.Unknown", field),
                );
            }
            let data = reader
                .len_delimited()
                .map_err(|e| e.at("runtime.Unknown", field))?;
            match tag {
                1 => Self::type_meta(data, &mut out)?,
                2 => out.raw = data,
                3 => out.content_encoding = text(data),
                _ => out.content_type = text(data),
            }
        }
        Ok(out)
    }

    fn type_meta(bytes: &[u8], out: &mut Self) -> Result<(), ProtobufError> {
        let mut reader = Reader::new(bytes);
        while !reader.is_empty() {
            let (tag, wire) = reader.key()?;
            if !matches!(tag, 1 | 2) || wire != WireType::Len {
                reader
                    .skip(tag, wire)
                    .map_err(|e| e.at("runtime.TypeMeta", "typeMeta"))?;
                continue;
            }
            let value = text(
                reader
                    .len_delimited()
                    .map_err(|e| e.at("runtime.TypeMeta", "typeMeta"))?,
            );
            if tag == 1 {
                out.api_version = value;
            } else {
                out.kind = value;
            }
        }
        Ok(())
    }
}

/// Bytes as text; invalid UTF-8 is replaced as Go's `string([]byte)` + JSON encoding would.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Walks messages with the generated table.
struct Decoder<'s> {
    schema: &'s Schema,
}

impl Decoder<'_> {
    fn envelope(&self, body: &[u8], depth: usize) -> Result<Value, ProtobufError> {
        let rest = body
            .strip_prefix(MAGIC)
            .ok_or(ProtobufError::MissingMagic)?;
        let env = Envelope::parse(rest)?;
        if !env.content_encoding.is_empty() {
            return Err(ProtobufError::UnsupportedEncoding(env.content_encoding));
        }
        if env.kind.is_empty() {
            return Err(ProtobufError::MissingKind);
        }
        let object = match env.content_type.as_str() {
            "" | CONTENT_TYPE => {
                let message = self
                    .schema
                    .message_for_kind(&env.api_version, &env.kind)
                    .ok_or_else(|| ProtobufError::UnknownKind {
                        api_version: env.api_version.clone(),
                        kind: env.kind.clone(),
                    })?;
                self.object(message, env.raw, depth)?
            }
            "application/json" => match serde_json::from_slice(env.raw) {
                Ok(Value::Object(map)) => map,
                Ok(_) => Map::new(),
                Err(source) => {
                    return Err(ProtobufError::InvalidJson {
                        context: "runtime.Unknown".into(),
                        source,
                    });
                }
            },
            other => return Err(ProtobufError::UnsupportedContentType(other.to_string())),
        };
        let mut out = Map::with_capacity(object.len() + 2);
        out.insert("apiVersion".into(), Value::String(env.api_version));
        out.insert("kind".into(), Value::String(env.kind));
        for (key, value) in object {
            if key != "apiVersion" && key != "kind" {
                out.insert(key, value);
            }
        }
        Ok(Value::Object(out))
    }

    /// One message as JSON; `None` when upstream's JSON would leave it out (a zero `Time`).
    fn message(
        &self,
        name: &str,
        bytes: &[u8],
        depth: usize,
    ) -> Result<Option<Value>, ProtobufError> {
        match name {
            "apimachinery.pkg.util.intstr.IntOrString" => {
                let fields = self.object(name, bytes, depth)?;
                let is_string = fields.get("type").and_then(Value::as_i64) == Some(1);
                Ok(Some(if is_string {
                    fields
                        .get("strVal")
                        .cloned()
                        .unwrap_or_else(|| Value::String(String::new()))
                } else {
                    fields
                        .get("intVal")
                        .cloned()
                        .unwrap_or_else(|| Value::from(0))
                }))
            }
            "apimachinery.pkg.api.resource.Quantity"
            | "apimachinery.pkg.api.resource.QuantityValue" => {
                let fields = self.object(name, bytes, depth)?;
                Ok(Some(
                    fields
                        .get("string")
                        .cloned()
                        .unwrap_or_else(|| Value::String("0".into())),
                ))
            }
            "apimachinery.pkg.apis.meta.v1.Time" | "apimachinery.pkg.apis.meta.v1.MicroTime" => {
                // Go marshals the zero time as an empty message and reads it back as zero.
                if bytes.is_empty() {
                    return Ok(None);
                }
                let fields = self.object(name, bytes, depth)?;
                let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
                let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
                format_time(seconds, nanos, name.ends_with("MicroTime"))
                    .map(|s| Some(Value::String(s)))
            }
            "apimachinery.pkg.apis.meta.v1.Duration" => {
                let fields = self.object(name, bytes, depth)?;
                let nanos = fields.get("duration").and_then(Value::as_i64).unwrap_or(0);
                Ok(Some(Value::String(go_duration(nanos))))
            }
            // A list in a message of its own; in JSON, just the list (a user's `extra` values).
            "apimachinery.pkg.apis.meta.v1.Verbs"
            | "api.authentication.v1.ExtraValue"
            | "api.authorization.v1.ExtraValue"
            | "api.certificates.v1.ExtraValue" => {
                let fields = self.object(name, bytes, depth)?;
                Ok(Some(
                    fields
                        .get("items")
                        .cloned()
                        .unwrap_or_else(|| Value::Array(Vec::new())),
                ))
            }
            "apimachinery.pkg.apis.meta.v1.FieldsV1" | "apimachinery.pkg.runtime.RawExtension" => {
                self.raw_json(name, bytes, depth)
            }
            _ => self
                .object(name, bytes, depth)
                .map(|map| Some(Value::Object(map))),
        }
    }

    /// The JSON carried in field 1 of a `RawExtension` or `FieldsV1`.
    fn raw_json(
        &self,
        name: &str,
        bytes: &[u8],
        depth: usize,
    ) -> Result<Option<Value>, ProtobufError> {
        let mut raw: &[u8] = &[];
        let mut reader = Reader::new(bytes);
        while !reader.is_empty() {
            let (tag, wire) = reader.key().map_err(|e| e.at(name, "raw"))?;
            if tag == 1 && wire == WireType::Len {
                raw = reader.len_delimited().map_err(|e| e.at(name, "raw"))?;
            } else {
                reader.skip(tag, wire).map_err(|e| e.at(name, "raw"))?;
            }
        }
        if raw.is_empty() {
            return Ok(None);
        }
        if raw.starts_with(MAGIC) {
            if depth >= MAX_DEPTH {
                return Err(ProtobufError::malformed(format!(
                    "messages nested deeper than {MAX_DEPTH}"
                )));
            }
            return self.envelope(raw, depth + 1).map(Some);
        }
        serde_json::from_slice(raw)
            .map(Some)
            .map_err(|source| ProtobufError::InvalidJson {
                context: name.to_string(),
                source,
            })
    }

    /// A message's fields as a JSON object, by the table.
    fn object(
        &self,
        name: &str,
        bytes: &[u8],
        depth: usize,
    ) -> Result<Map<String, Value>, ProtobufError> {
        if depth >= MAX_DEPTH {
            return Err(ProtobufError::malformed(format!(
                "messages nested deeper than {MAX_DEPTH}"
            )));
        }
        let fields = self
            .schema
            .message(name)
            .ok_or_else(|| ProtobufError::Schema(format!("message {name} is not in the table")))?;
        let mut out = Map::new();
        // Non-repeated message fields: their occurrences concatenated, which protobuf defines
        // as merging them; decoded once the whole message has been read.
        let mut singular: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut reader = Reader::new(bytes);
        while !reader.is_empty() {
            let (tag, wire) = reader.key().map_err(|e| e.at(name, "?"))?;
            let Some(index) = fields.iter().position(|f| f.tag == tag) else {
                reader
                    .skip(tag, wire)
                    .map_err(|e| e.at(name, &tag.to_string()))?;
                continue;
            };
            let field = &fields[index];
            let at = |e: ProtobufError| e.at(name, &field.json);
            match &field.ty {
                FieldType::Message(target) => {
                    expect_len(wire).map_err(at)?;
                    let data = reader.len_delimited().map_err(at)?;
                    if field.repeated {
                        let value = self
                            .message(target, data, depth + 1)?
                            .unwrap_or(Value::Null);
                        push(&mut out, &field.json, value);
                    } else if let Some((_, acc)) = singular.iter_mut().find(|(i, _)| *i == index) {
                        acc.extend_from_slice(data);
                    } else {
                        singular.push((index, data.to_vec()));
                    }
                }
                FieldType::Map(value_ty) => {
                    expect_len(wire).map_err(at)?;
                    let entry = reader.len_delimited().map_err(at)?;
                    let (key, value) = self.map_entry(value_ty, entry, depth + 1).map_err(at)?;
                    let map = out
                        .entry(field.json.clone())
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(map) = map {
                        map.insert(key, value);
                    }
                }
                scalar => {
                    let values = scalars(scalar, field.repeated, wire, &mut reader).map_err(at)?;
                    if field.repeated {
                        for value in values {
                            push(&mut out, &field.json, value);
                        }
                    } else if let Some(value) = values.into_iter().next_back() {
                        let go_zero = match &value {
                            Value::String(s) => s.is_empty() && !keeps_empty(name, field),
                            Value::Bool(b) => !b && !POINTER_SCALARS.contains(&field.json.as_str()),
                            Value::Number(n) => {
                                n.as_f64() == Some(0.0)
                                    && !POINTER_SCALARS.contains(&field.json.as_str())
                            }
                            _ => false,
                        };
                        if go_zero {
                            out.remove(&field.json);
                        } else {
                            out.insert(field.json.clone(), value);
                        }
                    }
                }
            }
        }
        for (index, data) in singular {
            let field = &fields[index];
            let FieldType::Message(target) = &field.ty else {
                continue;
            };
            match self.message(target, &data, depth + 1)? {
                Some(Value::Object(inner)) if field.json.is_empty() => out.extend(inner),
                Some(value) => {
                    out.insert(field.json.clone(), value);
                }
                None => {}
            }
        }
        Ok(out)
    }

    /// One `{1: key, 2: value}` map entry; absent parts are their zero values, as in Go.
    fn map_entry(
        &self,
        value_ty: &FieldType,
        bytes: &[u8],
        depth: usize,
    ) -> Result<(String, Value), ProtobufError> {
        let mut key = String::new();
        let mut value: Option<Value> = None;
        let mut message: Vec<u8> = Vec::new();
        let mut reader = Reader::new(bytes);
        while !reader.is_empty() {
            let (tag, wire) = reader.key()?;
            match (tag, value_ty) {
                (1, _) => {
                    expect_len(wire)?;
                    key = text(reader.len_delimited()?);
                }
                (2, FieldType::Message(_)) => {
                    expect_len(wire)?;
                    message.extend_from_slice(reader.len_delimited()?);
                }
                (2, FieldType::Map(_)) => return Err(ProtobufError::malformed("map of maps")),
                (2, scalar) => {
                    value = scalars(scalar, false, wire, &mut reader)?
                        .into_iter()
                        .next_back()
                }
                _ => reader.skip(tag, wire)?,
            }
        }
        let value = match value_ty {
            FieldType::Message(target) => self
                .message(target, &message, depth)?
                .unwrap_or(Value::Null),
            _ => value.unwrap_or_else(|| zero(value_ty)),
        };
        Ok((key, value))
    }
}

/// Appends to the list under `key`.
fn push(out: &mut Map<String, Value>, key: &str, value: Value) {
    match out
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(list) => list.push(value),
        other => *other = Value::Array(vec![value]),
    }
}

fn expect_len(wire: WireType) -> Result<(), ProtobufError> {
    if wire == WireType::Len {
        Ok(())
    } else {
        Err(ProtobufError::malformed(format!(
            "wire type {wire:?} where a length-delimited value belongs"
        )))
    }
}

/// Scalar fields that are pointers in upstream's Go types (`*int32`, `*int64`, `*bool`) in the
/// kinds this server serves and the options it takes, so a zero or `false` sent for them was
/// chosen and is kept. Everything else zero is Go's zero value and omitted, as upstream's JSON
/// omits it.
const POINTER_SCALARS: &[&str] = &[
    // apps/v1
    "replicas",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
    "partition",
    // core/v1 pod spec and security contexts
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "automountServiceAccountToken",
    "shareProcessNamespace",
    "priority",
    "enableServiceLinks",
    "setHostnameAsFQDN",
    "hostUsers",
    "privileged",
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "readOnlyRootFilesystem",
    "allowPrivilegeEscalation",
    "fsGroup",
    "defaultMode",
    "mode",
    "optional",
    "tolerationSeconds",
    "expirationSeconds",
    // metadata, delete options, leases
    "deletionGracePeriodSeconds",
    "gracePeriodSeconds",
    "orphanDependents",
    "leaseDurationSeconds",
    "leaseTransitions",
    // batch/v1, autoscaling/v2, scheduling and storage
    "parallelism",
    "completions",
    "backoffLimit",
    "suspend",
    "ttlSecondsAfterFinished",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "minReplicas",
    "averageUtilization",
    "allowVolumeExpansion",
];

/// Pointer strings whose `""` upstream keeps and gives a meaning.
fn keeps_empty(message: &str, field: &Field) -> bool {
    const KEEP: &[(&str, &str)] = &[("api.core.v1.PersistentVolumeClaimSpec", "storageClassName")];
    KEEP.iter().any(|&(m, f)| m == message && f == field.json)
}

/// The Go zero value of a scalar, for a map entry that omits its value.
fn zero(ty: &FieldType) -> Value {
    match ty {
        FieldType::String | FieldType::Bytes => Value::String(String::new()),
        FieldType::Int32 | FieldType::Int64 => Value::from(0),
        FieldType::Double => Value::from(0.0),
        FieldType::Bool => Value::Bool(false),
        FieldType::Message(_) | FieldType::Map(_) => Value::Null,
    }
}

/// Reads one scalar value, or (for a repeated field) a packed run of them, as JSON values.
fn scalars(
    ty: &FieldType,
    repeated: bool,
    wire: WireType,
    reader: &mut Reader<'_>,
) -> Result<Vec<Value>, ProtobufError> {
    match (ty, wire) {
        (FieldType::String, WireType::Len) => {
            Ok(vec![Value::String(text(reader.len_delimited()?))])
        }
        (FieldType::Bytes, WireType::Len) => {
            let bytes = reader.len_delimited()?;
            Ok(vec![Value::String(
                base64::engine::general_purpose::STANDARD.encode(bytes),
            )])
        }
        (
            FieldType::Int32 | FieldType::Int64 | FieldType::Bool | FieldType::Double,
            WireType::Len,
        ) if repeated => {
            let mut packed = Reader::new(reader.len_delimited()?);
            let element = if *ty == FieldType::Double {
                WireType::Fixed64
            } else {
                WireType::Varint
            };
            let mut out = Vec::new();
            while !packed.is_empty() {
                out.push(scalar(ty, element, &mut packed)?);
            }
            Ok(out)
        }
        _ => scalar(ty, wire, reader).map(|v| vec![v]),
    }
}

/// Reads one unpacked number or bool.
fn scalar(ty: &FieldType, wire: WireType, reader: &mut Reader<'_>) -> Result<Value, ProtobufError> {
    // Truncating casts are the protobuf rules: int32 travels sign-extended to 64 bits.
    match (ty, wire) {
        (FieldType::Int32, WireType::Varint) => Ok(Value::from(reader.varint()? as i32)),
        (FieldType::Int64, WireType::Varint) => Ok(Value::from(reader.varint()? as i64)),
        (FieldType::Bool, WireType::Varint) => Ok(Value::Bool(reader.varint()? != 0)),
        (FieldType::Double, WireType::Fixed64) => {
            let value = f64::from_bits(reader.fixed64()?);
            serde_json::Number::from_f64(value)
                .map(Value::Number)
                .ok_or_else(|| ProtobufError::malformed(format!("double {value} has no JSON form")))
        }
        _ => Err(ProtobufError::malformed(format!(
            "wire type {wire:?} does not carry a {ty:?}"
        ))),
    }
}

/// Formats a `meta.v1.Time` (whole seconds, as upstream drops nanoseconds when reading it) or a
/// `meta.v1.MicroTime` (six fractional digits) the way their JSON marshallers do, in UTC.
fn format_time(seconds: i64, nanos: i64, micro: bool) -> Result<String, ProtobufError> {
    let nanos = if micro { nanos } else { 0 };
    let nanos = i32::try_from(nanos)
        .ok()
        .filter(|n| (0..1_000_000_000).contains(n))
        .ok_or_else(|| ProtobufError::malformed(format!("nanos {nanos} out of range")))?;
    let ts = jiff::Timestamp::new(seconds, nanos)
        .map_err(|e| ProtobufError::malformed(format!("time {seconds}s out of range: {e}")))?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S.%6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(ts.strftime(format).to_string())
}

/// Formats nanoseconds as Go's `time.Duration.String()` does: `1h0m0s`, `1.5s`, `300ms`, `0s`.
fn go_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u == 0 {
        return "0s".to_string();
    }
    if u < 1_000_000_000 {
        let (unit, scale, digits) = if u < 1_000 {
            ("ns", 1, 0)
        } else if u < 1_000_000 {
            ("µs", 1_000, 3)
        } else {
            ("ms", 1_000_000, 6)
        };
        return format!("{sign}{}{}{unit}", u / scale, fraction(u % scale, digits));
    }
    let secs = u / 1_000_000_000;
    let frac = fraction(u % 1_000_000_000, 9);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}{frac}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}{frac}s")
    } else {
        format!("{sign}{s}{frac}s")
    }
}

/// `.digits` of a fraction with trailing zeros trimmed, or nothing when it is zero.
fn fraction(value: u64, digits: usize) -> String {
    if value == 0 || digits == 0 {
        return String::new();
    }
    let padded = format!("{value:0digits$}");
    format!(".{}", padded.trim_end_matches('0'))
}

#[cfg(test)]
mod tests;
