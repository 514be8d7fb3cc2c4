use serde_json::json;

use super::document;

/// One decoded field: its number and, for length-delimited fields, the bytes; varints and
/// fixed64s as their value.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
}

fn varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn fields(buf: &[u8]) -> Vec<(u32, Field)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos);
        let field = (key >> 3) as u32;
        let value = match key & 7 {
            0 => Field::Varint(varint(buf, &mut pos)),
            1 => {
                let v = u64::from_le_bytes(buf[pos..pos + 8].try_into().unwrap());
                pos += 8;
                Field::Fixed64(v)
            }
            2 => {
                let len = varint(buf, &mut pos) as usize;
                let v = buf[pos..pos + len].to_vec();
                pos += len;
                Field::Bytes(v)
            }
            w => panic!("unexpected wire type {w}"),
        };
        out.push((field, value));
    }
    out
}

/// Every value of `field` in `buf`.
fn all(buf: &[u8], field: u32) -> Vec<Vec<u8>> {
    fields(buf)
        .into_iter()
        .filter(|(f, _)| *f == field)
        .map(|(_, v)| match v {
            Field::Bytes(b) => b,
            other => panic!("field {field} is {other:?}"),
        })
        .collect()
}

fn one(buf: &[u8], field: u32) -> Vec<u8> {
    let v = all(buf, field);
    assert_eq!(v.len(), 1, "field {field} appears {} times", v.len());
    v.into_iter().next().unwrap()
}

fn text(buf: &[u8], field: u32) -> String {
    String::from_utf8(one(buf, field)).unwrap()
}

/// The `Named*` pairs of a map message: (name, value bytes).
fn named(buf: &[u8], field: u32) -> Vec<(String, Vec<u8>)> {
    all(buf, field)
        .iter()
        .map(|pair| (text(pair, 1), one(pair, 2)))
        .collect()
}

#[test]
fn a_document_is_gnostics_openapi_v2_document() {
    let doc = json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.28.0"},
        "paths": {
            "/api/v1/namespaces/{namespace}/pods/{name}": {
                "parameters": [
                    {"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true},
                    {"$ref": "#/parameters/pretty"},
                ],
                "patch": {
                    "operationId": "patchCoreV1NamespacedPod",
                    "consumes": ["application/apply-patch+yaml"],
                    "parameters": [
                        {"name": "body", "in": "body", "required": true, "schema": {"type": "object"}},
                        {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                    ],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.Pod"}}},
                    "x-kubernetes-group-version-kind": {"group": "", "kind": "Pod", "version": "v1"},
                },
            },
        },
        "definitions": {
            "io.k8s.api.core.v1.Pod": {
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "spec": {"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec", "description": "d"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "closed": {"type": "object", "additionalProperties": false},
                    "n": {"type": "integer", "format": "int32", "minimum": 1.5, "maxLength": 3},
                },
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
            },
        },
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    });
    let pb = document(&doc);
    // Upstream's bytes start the same way: field 1, "2.0".
    assert_eq!(&pb[..5], b"\x0a\x032.0");
    let info = one(&pb, 2);
    assert_eq!(text(&info, 1), "Kubernetes");
    assert_eq!(text(&info, 2), "v1.28.0");

    let paths = named(&one(&pb, 8), 2);
    assert_eq!(paths.len(), 1);
    let (path, item) = &paths[0];
    assert_eq!(path, "/api/v1/namespaces/{namespace}/pods/{name}");
    let path_params = all(item, 9);
    // A path parameter: NonBodyParameter's path_parameter_sub_schema (4), `type` at 5.
    let path_param = one(&one(&one(&path_params[0], 1), 2), 4);
    assert_eq!(fields(&path_param)[0], (1, Field::Varint(1)));
    assert_eq!(text(&path_param, 4), "name");
    assert_eq!(text(&path_param, 5), "string");
    assert_eq!(fields(&path_param).last(), Some(&(19, Field::Varint(1))));
    // A reference: ParametersItem's json_reference (2).
    assert_eq!(text(&one(&path_params[1], 2), 1), "#/parameters/pretty");

    let patch = one(item, 8);
    assert_eq!(text(&patch, 5), "patchCoreV1NamespacedPod");
    assert_eq!(text(&patch, 7), "application/apply-patch+yaml");
    let params = all(&patch, 8);
    let body = one(&one(&params[0], 1), 1);
    assert_eq!(text(&body, 3), "body");
    assert_eq!(text(&one(&one(&body, 5), 22), 1), "object");
    // A query parameter: query_parameter_sub_schema (3), `type` at 6 after allowEmptyValue.
    let query = one(&one(&one(&params[1], 1), 2), 3);
    assert_eq!(text(&query, 4), "fieldValidation");
    assert_eq!(text(&query, 6), "string");
    let responses = named(&one(&patch, 9), 1);
    assert_eq!(responses[0].0, "200");
    let ok = one(&responses[0].1, 1);
    assert_eq!(text(&ok, 1), "OK");
    assert_eq!(
        text(&one(&one(&ok, 2), 1), 1),
        "#/definitions/io.k8s.api.core.v1.Pod"
    );
    let ext = named(&patch, 13);
    assert_eq!(ext[0].0, "x-kubernetes-group-version-kind");
    let yaml: serde_json::Value = serde_json::from_str(&text(&ext[0].1, 2)).unwrap();
    assert_eq!(yaml, json!({"group": "", "kind": "Pod", "version": "v1"}));

    let defs = named(&one(&pb, 9), 1);
    assert_eq!(defs[0].0, "io.k8s.api.core.v1.Pod");
    let pod = &defs[0].1;
    assert_eq!(text(&one(pod, 22), 1), "object");
    assert_eq!(text(pod, 19), "spec");
    let props = named(&one(pod, 25), 1);
    let names: Vec<&str> = props.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["spec", "tags", "labels", "closed", "n"]);
    assert_eq!(
        text(&props[0].1, 1),
        "#/definitions/io.k8s.api.core.v1.PodSpec"
    );
    assert_eq!(text(&props[0].1, 4), "d");
    let items = all(&one(&props[1].1, 23), 1);
    assert_eq!(items.len(), 1);
    assert_eq!(text(&one(&items[0], 22), 1), "string");
    let labels = one(&one(&props[2].1, 21), 1);
    assert_eq!(text(&one(&labels, 22), 1), "string");
    // `additionalProperties: false` survives as the oneof's boolean.
    assert_eq!(fields(&one(&props[3].1, 21)), [(2, Field::Varint(0))]);
    let n = fields(&props[4].1);
    assert!(n.contains(&(9, Field::Fixed64(1.5f64.to_bits()))), "{n:?}");
    assert!(n.contains(&(11, Field::Varint(3))), "{n:?}");
    let gvk = named(pod, 31);
    assert_eq!(gvk[0].0, "x-kubernetes-group-version-kind");

    let security = named(&one(&pb, 13), 1);
    let api_key = one(&security[0].1, 2);
    assert_eq!(text(&api_key, 1), "apiKey");
    assert_eq!(text(&api_key, 3), "header");
    let requirement = named(&one(&pb, 12), 1);
    assert_eq!(requirement[0].0, "BearerToken");
}

#[test]
fn hostile_shapes_encode_without_panicking() {
    for doc in [
        json!(null),
        json!([]),
        json!({"paths": [], "definitions": "x", "info": 3}),
        json!({"definitions": {"a": {"items": [1, {"type": ["string", "null"]}], "maxLength": -1}}}),
        json!({"paths": {"/": {"get": {"parameters": [7, {"in": 3}], "responses": {"200": 1}}}}}),
    ] {
        let _ = document(&doc);
    }
}
