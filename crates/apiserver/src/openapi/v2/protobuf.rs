//! The protobuf form of `/openapi/v2`: gnostic's `openapi.v2.Document`, which upstream serves
//! for `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`.
//!
//! client-go's `OpenAPISchema` asks for nothing else and does not fall back to JSON, so kubectl's
//! client-side validation (`apply --validate=strict` of a kind whose schema the server does not
//! vouch for, such as a custom resource whose CRD is missing) fails on any other answer. Upstream
//! builds this with gnostic's `ParseDocument` over the JSON document and `proto.Marshal`
//! (kube-openapi's `handler.ToProtoBinary`); this walks the same JSON into the same messages
//! (field numbers from gnostic's `openapiv2/OpenAPIv2.proto`), every map as its ordered list of
//! named pairs, every free-form value (`default`, `enum`, `example`, `x-*` extensions) as an
//! `Any` whose `yaml` holds the value (JSON text, which is YAML, and which kubectl's
//! `kube-openapi/pkg/util/proto` reads back with a YAML decoder). Keys a message has no field for
//! are left out, as gnostic leaves them out of the message.

use serde_json::{Map, Value};

/// A message being written: proto3, so zero values are omitted and fields go in number order.
#[derive(Default)]
struct Message(Vec<u8>);

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, LEN);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// A string field; empty strings are proto3's default and not written.
    fn string(&mut self, field: u32, v: Option<&Value>) {
        if let Some(s) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A `repeated string` field from a JSON array of strings (or one string).
    fn strings(&mut self, field: u32, v: Option<&Value>) {
        match v {
            Some(Value::String(s)) => self.bytes(field, s.as_bytes()),
            Some(Value::Array(a)) => {
                for s in a.iter().filter_map(Value::as_str) {
                    self.bytes(field, s.as_bytes());
                }
            }
            _ => {}
        }
    }

    fn bool(&mut self, field: u32, v: Option<&Value>) {
        if v.and_then(Value::as_bool) == Some(true) {
            self.key(field, VARINT);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u32, v: Option<&Value>) {
        let n = v.and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)));
        if let Some(n) = n.filter(|n| *n != 0) {
            self.key(field, VARINT);
            // Negative int64s are their two's complement, ten bytes on the wire.
            self.varint(n as u64);
        }
    }

    fn double(&mut self, field: u32, v: Option<&Value>) {
        if let Some(f) = v.and_then(Value::as_f64).filter(|f| *f != 0.0) {
            self.key(field, FIXED64);
            self.0.extend_from_slice(&f.to_bits().to_le_bytes());
        }
    }

    /// A submessage; written even when empty, since a present-but-empty message (an empty
    /// `properties`) means something different from an absent one to kubectl's parser.
    fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }

    /// `Any { yaml = 2 }` holding a free-form value.
    fn any(&mut self, field: u32, v: Option<&Value>) {
        if let Some(v) = v {
            self.message(field, any(v));
        }
    }

    /// `repeated Any`, one per element.
    fn anys(&mut self, field: u32, v: Option<&Value>) {
        if let Some(Value::Array(a)) = v {
            for v in a {
                self.message(field, any(v));
            }
        }
    }

    /// `repeated NamedAny vendor_extension`: every `x-` key, in the document's order.
    fn vendor_extensions(&mut self, field: u32, m: &Map<String, Value>) {
        for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
            let mut pair = Message::default();
            pair.bytes(1, k.as_bytes());
            pair.message(2, any(v));
            self.message(field, pair);
        }
    }

    /// A map of names to messages, as gnostic's ordered `Named*` pairs: `{name = 1; value = 2}`
    /// repeated at `field`.
    fn named(&mut self, field: u32, v: Option<&Value>, value: impl Fn(&Value) -> Message) {
        if let Some(Value::Object(m)) = v {
            for (k, v) in m {
                let mut pair = Message::default();
                pair.bytes(1, k.as_bytes());
                pair.message(2, value(v));
                self.message(field, pair);
            }
        }
    }
}

fn any(v: &Value) -> Message {
    let mut m = Message::default();
    let text = serde_json::to_string(v).unwrap_or_default();
    m.bytes(2, format!("{text}\n").as_bytes());
    m
}

fn object(v: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    v.as_object().unwrap_or(&EMPTY)
}

/// Encodes a Swagger 2.0 document (as `/openapi/v2` serves it in JSON) as `openapi.v2.Document`.
pub fn document(doc: &Value) -> Vec<u8> {
    let d = object(doc);
    let mut m = Message::default();
    m.string(1, d.get("swagger"));
    if let Some(info) = d.get("info") {
        m.message(2, info_message(info));
    }
    m.string(3, d.get("host"));
    m.string(4, d.get("basePath"));
    m.strings(5, d.get("schemes"));
    m.strings(6, d.get("consumes"));
    m.strings(7, d.get("produces"));
    if let Some(Value::Object(paths)) = d.get("paths") {
        let mut p = Message::default();
        p.vendor_extensions(1, paths);
        for (path, item) in paths.iter().filter(|(k, _)| !k.starts_with("x-")) {
            let mut pair = Message::default();
            pair.bytes(1, path.as_bytes());
            pair.message(2, path_item(item));
            p.message(2, pair);
        }
        m.message(8, p);
    }
    if let Some(defs) = d.get("definitions") {
        let mut p = Message::default();
        p.named(1, Some(defs), schema);
        m.message(9, p);
    }
    if let Some(params) = d.get("parameters") {
        let mut p = Message::default();
        p.named(1, Some(params), parameter);
        m.message(10, p);
    }
    if let Some(responses) = d.get("responses") {
        let mut p = Message::default();
        p.named(1, Some(responses), response);
        m.message(11, p);
    }
    security_requirements(&mut m, 12, d.get("security"));
    if let Some(defs) = d.get("securityDefinitions") {
        let mut p = Message::default();
        p.named(1, Some(defs), security_definition);
        m.message(13, p);
    }
    if let Some(Value::Array(tags)) = d.get("tags") {
        for t in tags {
            let t = object(t);
            let mut tag = Message::default();
            tag.string(1, t.get("name"));
            tag.string(2, t.get("description"));
            tag.vendor_extensions(4, t);
            m.message(14, tag);
        }
    }
    m.vendor_extensions(16, d);
    m.0
}

fn info_message(v: &Value) -> Message {
    let i = object(v);
    let mut m = Message::default();
    m.string(1, i.get("title"));
    m.string(2, i.get("version"));
    m.string(3, i.get("description"));
    m.string(4, i.get("termsOfService"));
    m.vendor_extensions(7, i);
    m
}

fn path_item(v: &Value) -> Message {
    let p = object(v);
    let mut m = Message::default();
    m.string(1, p.get("$ref"));
    for (field, verb) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(op) = p.get(verb) {
            m.message(field, operation(op));
        }
    }
    parameters(&mut m, 9, p.get("parameters"));
    m.vendor_extensions(10, p);
    m
}

fn operation(v: &Value) -> Message {
    let o = object(v);
    let mut m = Message::default();
    m.strings(1, o.get("tags"));
    m.string(2, o.get("summary"));
    m.string(3, o.get("description"));
    m.string(5, o.get("operationId"));
    m.strings(6, o.get("produces"));
    m.strings(7, o.get("consumes"));
    parameters(&mut m, 8, o.get("parameters"));
    if let Some(Value::Object(responses)) = o.get("responses") {
        let mut r = Message::default();
        for (code, value) in responses.iter().filter(|(k, _)| !k.starts_with("x-")) {
            let mut pair = Message::default();
            pair.bytes(1, code.as_bytes());
            // ResponseValue: a reference, or a response.
            let mut one = Message::default();
            match value.get("$ref") {
                Some(_) => one.message(2, json_reference(value)),
                None => one.message(1, response(value)),
            }
            pair.message(2, one);
            r.message(1, pair);
        }
        r.vendor_extensions(2, responses);
        m.message(9, r);
    }
    m.strings(10, o.get("schemes"));
    m.bool(11, o.get("deprecated"));
    security_requirements(&mut m, 12, o.get("security"));
    m.vendor_extensions(13, o);
    m
}

fn json_reference(v: &Value) -> Message {
    let mut m = Message::default();
    m.string(1, v.get("$ref"));
    m.string(2, v.get("description"));
    m
}

/// `repeated ParametersItem`: each a reference or a parameter.
fn parameters(m: &mut Message, field: u32, v: Option<&Value>) {
    if let Some(Value::Array(a)) = v {
        for p in a {
            let mut item = Message::default();
            match p.get("$ref") {
                Some(_) => item.message(2, json_reference(p)),
                None => item.message(1, parameter(p)),
            }
            m.message(field, item);
        }
    }
}

/// `Parameter`: a body parameter, or one of the four non-body sub-schemas chosen by `in`, as
/// gnostic picks the one alternative that validates.
fn parameter(v: &Value) -> Message {
    let p = object(v);
    let mut m = Message::default();
    let location = p.get("in").and_then(Value::as_str).unwrap_or("");
    if location == "body" {
        let mut body = Message::default();
        body.string(1, p.get("description"));
        body.string(2, p.get("name"));
        body.string(3, p.get("in"));
        body.bool(4, p.get("required"));
        if let Some(s) = p.get("schema") {
            body.message(5, schema(s));
        }
        body.vendor_extensions(6, p);
        m.message(1, body);
        return m;
    }
    // Header and path sub-schemas lack `allowEmptyValue` (field 5 of the query and formData
    // ones), so their later fields sit one lower.
    let (alternative, allow_empty) = match location {
        "header" => (1, false),
        "formData" => (2, true),
        "query" => (3, true),
        _ => (4, false),
    };
    let mut sub = Message::default();
    sub.bool(1, p.get("required"));
    sub.string(2, p.get("in"));
    sub.string(3, p.get("description"));
    sub.string(4, p.get("name"));
    let first = if allow_empty {
        sub.bool(5, p.get("allowEmptyValue"));
        6
    } else {
        5
    };
    primitive_fields(&mut sub, first, p);
    let mut non_body = Message::default();
    non_body.message(alternative, sub);
    m.message(2, non_body);
    m
}

/// The fields every primitive-typed message shares, in this order from `first`: type, format,
/// items, collectionFormat, default, maximum, exclusiveMaximum, minimum, exclusiveMinimum,
/// maxLength, minLength, pattern, maxItems, minItems, uniqueItems, enum, multipleOf, then the
/// vendor extensions.
fn primitive_fields(m: &mut Message, first: u32, p: &Map<String, Value>) {
    m.string(first, p.get("type"));
    m.string(first + 1, p.get("format"));
    if let Some(items) = p.get("items") {
        m.message(first + 2, primitives_items(items));
    }
    m.string(first + 3, p.get("collectionFormat"));
    m.any(first + 4, p.get("default"));
    m.double(first + 5, p.get("maximum"));
    m.bool(first + 6, p.get("exclusiveMaximum"));
    m.double(first + 7, p.get("minimum"));
    m.bool(first + 8, p.get("exclusiveMinimum"));
    m.int64(first + 9, p.get("maxLength"));
    m.int64(first + 10, p.get("minLength"));
    m.string(first + 11, p.get("pattern"));
    m.int64(first + 12, p.get("maxItems"));
    m.int64(first + 13, p.get("minItems"));
    m.bool(first + 14, p.get("uniqueItems"));
    m.anys(first + 15, p.get("enum"));
    m.double(first + 16, p.get("multipleOf"));
    m.vendor_extensions(first + 17, p);
}

fn primitives_items(v: &Value) -> Message {
    let mut m = Message::default();
    primitive_fields(&mut m, 1, object(v));
    m
}

fn response(v: &Value) -> Message {
    let r = object(v);
    let mut m = Message::default();
    m.string(1, r.get("description"));
    if let Some(s) = r.get("schema") {
        // SchemaItem: a schema (a `file` schema has a message of its own).
        let mut item = Message::default();
        if s.get("type").and_then(Value::as_str) == Some("file") {
            let f = object(s);
            let mut file = Message::default();
            file.string(1, f.get("format"));
            file.string(2, f.get("title"));
            file.string(3, f.get("description"));
            file.any(4, f.get("default"));
            file.strings(5, f.get("required"));
            file.string(6, f.get("type"));
            file.bool(7, f.get("readOnly"));
            file.any(9, f.get("example"));
            file.vendor_extensions(10, f);
            item.message(2, file);
        } else {
            item.message(1, schema(s));
        }
        m.message(2, item);
    }
    if let Some(headers) = r.get("headers") {
        let mut h = Message::default();
        h.named(1, Some(headers), |v| {
            let h = object(v);
            let mut m = Message::default();
            primitive_fields(&mut m, 1, h);
            m.string(18, h.get("description"));
            m
        });
        m.message(3, h);
    }
    if let Some(examples) = r.get("examples") {
        let mut e = Message::default();
        e.named(1, Some(examples), any);
        m.message(4, e);
    }
    m.vendor_extensions(5, r);
    m
}

/// `Schema`, recursively.
fn schema(v: &Value) -> Message {
    let s = object(v);
    let mut m = Message::default();
    m.string(1, s.get("$ref"));
    m.string(2, s.get("format"));
    m.string(3, s.get("title"));
    m.string(4, s.get("description"));
    m.any(5, s.get("default"));
    m.double(6, s.get("multipleOf"));
    m.double(7, s.get("maximum"));
    m.bool(8, s.get("exclusiveMaximum"));
    m.double(9, s.get("minimum"));
    m.bool(10, s.get("exclusiveMinimum"));
    m.int64(11, s.get("maxLength"));
    m.int64(12, s.get("minLength"));
    m.string(13, s.get("pattern"));
    m.int64(14, s.get("maxItems"));
    m.int64(15, s.get("minItems"));
    m.bool(16, s.get("uniqueItems"));
    m.int64(17, s.get("maxProperties"));
    m.int64(18, s.get("minProperties"));
    m.strings(19, s.get("required"));
    m.anys(20, s.get("enum"));
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut a = Message::default();
            // A oneof member is written even when false, so `false` stays distinguishable.
            a.key(2, VARINT);
            a.varint(u64::from(*b));
            m.message(21, a);
        }
        Some(v @ Value::Object(_)) => {
            let mut a = Message::default();
            a.message(1, schema(v));
            m.message(21, a);
        }
        _ => {}
    }
    if let Some(t) = s.get("type") {
        let mut ty = Message::default();
        ty.strings(1, Some(t));
        m.message(22, ty);
    }
    match s.get("items") {
        Some(Value::Array(a)) => {
            let mut items = Message::default();
            for item in a {
                items.message(1, schema(item));
            }
            m.message(23, items);
        }
        Some(item @ Value::Object(_)) => {
            let mut items = Message::default();
            items.message(1, schema(item));
            m.message(23, items);
        }
        _ => {}
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
        for one in all {
            m.message(24, schema(one));
        }
    }
    if let Some(props) = s.get("properties") {
        let mut p = Message::default();
        p.named(1, Some(props), schema);
        m.message(25, p);
    }
    m.string(26, s.get("discriminator"));
    m.bool(27, s.get("readOnly"));
    if let Some(docs) = s.get("externalDocs") {
        let d = object(docs);
        let mut e = Message::default();
        e.string(1, d.get("description"));
        e.string(2, d.get("url"));
        e.vendor_extensions(3, d);
        m.message(29, e);
    }
    m.any(30, s.get("example"));
    m.vendor_extensions(31, s);
    m
}

/// `repeated SecurityRequirement`: each `{scheme: [scopes]}` as `NamedStringArray`s.
fn security_requirements(m: &mut Message, field: u32, v: Option<&Value>) {
    if let Some(Value::Array(reqs)) = v {
        for r in reqs {
            let mut req = Message::default();
            req.named(1, Some(r), |scopes| {
                let mut a = Message::default();
                a.strings(1, Some(scopes));
                a
            });
            m.message(field, req);
        }
    }
}

/// `SecurityDefinitionsItem`: basic (1) or API key (2); the OAuth2 flows (3 to 6) by `flow`.
fn security_definition(v: &Value) -> Message {
    let s = object(v);
    let mut item = Message::default();
    let mut m = Message::default();
    match s.get("type").and_then(Value::as_str) {
        Some("basic") => {
            m.string(1, s.get("type"));
            m.string(2, s.get("description"));
            m.vendor_extensions(3, s);
            item.message(1, m);
        }
        Some("apiKey") => {
            m.string(1, s.get("type"));
            m.string(2, s.get("name"));
            m.string(3, s.get("in"));
            m.string(4, s.get("description"));
            m.vendor_extensions(5, s);
            item.message(2, m);
        }
        Some("oauth2") => {
            m.string(1, s.get("type"));
            m.string(2, s.get("flow"));
            if let Some(scopes) = s.get("scopes") {
                let mut sc = Message::default();
                sc.named(1, Some(scopes), |v| {
                    let mut m = Message::default();
                    // NamedString's value is the string itself, not a message.
                    if let Some(t) = v.as_str() {
                        m.0.extend_from_slice(t.as_bytes());
                    }
                    m
                });
                m.message(3, sc);
            }
            let alternative = match s.get("flow").and_then(Value::as_str) {
                Some("implicit") => {
                    m.string(4, s.get("authorizationUrl"));
                    m.string(5, s.get("description"));
                    m.vendor_extensions(6, s);
                    3
                }
                Some("password") => {
                    m.string(4, s.get("tokenUrl"));
                    m.string(5, s.get("description"));
                    m.vendor_extensions(6, s);
                    4
                }
                Some("application") => {
                    m.string(4, s.get("tokenUrl"));
                    m.string(5, s.get("description"));
                    m.vendor_extensions(6, s);
                    5
                }
                _ => {
                    m.string(4, s.get("authorizationUrl"));
                    m.string(5, s.get("tokenUrl"));
                    m.string(6, s.get("description"));
                    m.vendor_extensions(7, s);
                    6
                }
            };
            item.message(alternative, m);
        }
        _ => {}
    }
    item
}

#[cfg(test)]
mod tests;
