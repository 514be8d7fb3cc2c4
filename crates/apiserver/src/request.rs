//! Turning an HTTP request into what it asks of the API: the resource it targets, its query
//! parameters, the representation it accepts, and its decoded body.

use crate::{
    error::{ApiError, ApiResult},
    registry::{Kind, Registry, Subresource},
};
use axum::http::HeaderMap;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The largest request body accepted (upstream's limit is 3 MiB for JSON objects).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Reads a request's body: at most `limit` bytes (413 past it, as upstream's `limitedReadBody`),
/// and within `deadline`, so that a client sending a byte now and then cannot hold the request
/// (and its in-flight slot) open. Upstream's request timeout answers such a request with 504 and
/// this Status.
pub async fn read_body(
    body: axum::body::Body,
    limit: usize,
    deadline: std::time::Duration,
) -> ApiResult<Bytes> {
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(ApiError::too_large(limit)),
        Err(_) => Err(ApiError {
            details: Some(serde_json::json!({})),
            ..ApiError::timeout("Timeout: request did not complete within the allotted timeout")
        }),
    }
}

/// The object or collection a request is about.
#[derive(Debug, Clone)]
pub struct Target {
    /// The kind served at the path (for a view, the view; see [`Registry::storage_of`]).
    pub def: Arc<Kind>,
    /// The namespace from the path (`None` for cluster-scoped and all-namespace requests).
    pub namespace: Option<String>,
    /// The object's name (`None` for the collection).
    pub name: Option<String>,
    /// The subresource, if any.
    pub sub: Option<Subresource>,
}

impl Target {
    /// The name, or a 405-style error for verbs that need one.
    pub fn name(&self) -> ApiResult<&str> {
        self.name
            .as_deref()
            .ok_or_else(|| ApiError::method_not_allowed("this verb needs a resource name"))
    }
}

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...` paths against the served kinds.
pub fn parse_path(registry: &Registry, path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        // `/namespaces/{ns}/{resource}...`, but `/namespaces/{name}` and
        // `/namespaces/{name}/status|finalize` are the namespace object itself.
        ["namespaces", ns, res, more @ ..]
            if group.is_empty() && !matches!(*res, "status" | "finalize") =>
        {
            (
                Some(ns.to_string()),
                std::iter::once(*res)
                    .chain(more.iter().copied())
                    .collect::<Vec<_>>(),
            )
        }
        ["namespaces", ns, res, more @ ..] if !group.is_empty() => (
            Some(ns.to_string()),
            std::iter::once(*res)
                .chain(more.iter().copied())
                .collect::<Vec<_>>(),
        ),
        other => (None, other.to_vec()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    let def = registry.find(group, version, plural)?;
    if namespace.is_some() && !def.namespaced {
        return None;
    }
    let sub = match sub {
        None => None,
        Some(s) => Some(*def.subresources.iter().find(|x| x.name() == s)?),
    };
    if name.is_some_and(str::is_empty) {
        return None;
    }
    Some(Target {
        def,
        namespace,
        name: name.map(str::to_string),
        sub,
    })
}

/// The query parameters the API understands (unknown ones are ignored, as upstream does).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Params {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: `NotOlderThan` or `Exact`.
    pub resource_version_match: Option<String>,
    /// `limit`.
    pub limit: Option<String>,
    /// `continue`.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
    /// `watch`.
    pub watch: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: Option<String>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<String>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<String>,
    /// `dryRun` (only `All` is defined).
    pub dry_run: Option<String>,
    /// `fieldValidation`: `Strict`, `Warn` or `Ignore`.
    pub field_validation: Option<String>,
    /// `propagationPolicy`.
    pub propagation_policy: Option<String>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<String>,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `force` (server-side apply only).
    pub force: Option<String>,
    /// `includeObject` (metav1.TableOptions): how much of each object a Table row embeds.
    pub include_object: Option<String>,
    /// `container` (PodLogOptions, PodExecOptions).
    pub container: Option<String>,
    /// `previous` (PodLogOptions).
    pub previous: Option<String>,
    /// `follow` (PodLogOptions).
    pub follow: Option<String>,
    /// `timestamps` (PodLogOptions).
    pub timestamps: Option<String>,
    /// `tailLines` (PodLogOptions).
    pub tail_lines: Option<String>,
    /// `limitBytes` (PodLogOptions).
    pub limit_bytes: Option<String>,
    /// `sinceSeconds` (PodLogOptions).
    pub since_seconds: Option<String>,
    /// `sinceTime` (PodLogOptions).
    pub since_time: Option<String>,
    /// `command` (PodExecOptions; the first of them).
    pub command: Option<String>,
}

/// Reads a boolean query value as upstream does (`true`, `1`).
pub fn flag(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("true" | "1" | "True" | "TRUE"))
}

impl Params {
    /// Parses a query string.
    pub fn parse(query: Option<&str>) -> ApiResult<Self> {
        match query {
            None | Some("") => Ok(Self::default()),
            Some(q) => serde_urlencoded_like(q),
        }
    }

    /// Whether this is a watch.
    pub fn is_watch(&self) -> bool {
        flag(&self.watch)
    }

    /// Whether `dryRun=All` was asked for.
    pub fn dry_run(&self) -> ApiResult<bool> {
        match self.dry_run.as_deref() {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "Invalid dry run value \"{other}\": only \"All\" is supported"
            ))),
        }
    }

    /// `limit` as a number (0 = no limit).
    pub fn limit(&self) -> ApiResult<usize> {
        match self.limit.as_deref() {
            None | Some("") => Ok(0),
            Some(s) => s.parse::<i64>().map(|n| n.max(0) as usize).map_err(|_| {
                ApiError::bad_request(format!("invalid limit {s:?}: must be an integer"))
            }),
        }
    }

    /// `timeoutSeconds` as a number.
    pub fn timeout_seconds(&self) -> ApiResult<Option<u64>> {
        self.timeout_seconds
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {s:?}")))
            })
            .transpose()
    }

    /// `gracePeriodSeconds` as a number.
    pub fn grace_period_seconds(&self) -> ApiResult<Option<i64>> {
        self.grace_period_seconds
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {s:?}")))
            })
            .transpose()
    }

    /// `resourceVersion` parsed: `None` when unset or empty.
    pub fn resource_version(&self) -> ApiResult<Option<u64>> {
        parse_rv(self.resource_version.as_deref())
    }
}

/// Parses a `resourceVersion` string; empty means unset.
pub fn parse_rv(rv: Option<&str>) -> ApiResult<Option<u64>> {
    match rv {
        None | Some("") => Ok(None),
        Some(s) => s
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}"))),
    }
}

fn serde_urlencoded_like(q: &str) -> ApiResult<Params> {
    // axum's `Query` rejects repeated keys; decode pairs ourselves and keep the first of each, as
    // Go's `url.Values.Get` does.
    let mut map = serde_json::Map::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode_component(k)?;
        let v = decode_component(v)?;
        map.entry(k).or_insert(Value::String(v));
    }
    serde_json::from_value(Value::Object(map))
        .map_err(|e| ApiError::bad_request(format!("invalid query parameters: {e}")))
}

fn decode_component(s: &str) -> ApiResult<String> {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| ApiError::bad_request("query parameters are not valid UTF-8"))
}

/// What representation the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The object(s) as JSON.
    Json,
    /// A `meta.k8s.io/v1` Table; the flag says how much of each object to include.
    Table(crate::table::IncludeObject),
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
}

/// Picks the representation from `Accept`, in the client's order of preference.
pub fn negotiate(headers: &HeaderMap, include_object: Option<&str>) -> ApiResult<Output> {
    let Some(accept) = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(Output::Json);
    };
    let mut unsupported = None;
    for clause in accept.split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
        if !matches!(
            media,
            "application/json" | "application/*" | "*/*" | "application/yaml"
        ) {
            unsupported = Some(media.to_string());
            continue;
        }
        match param("as") {
            None => return Ok(Output::Json),
            Some("Table") if param("g") == Some("meta.k8s.io") => {
                // Upstream's asTable (endpoints/handlers/response.go) takes `Object`, `Metadata`,
                // `None` or nothing, and answers anything else with this BadRequest.
                let include = match include_object {
                    None => crate::table::IncludeObject::Metadata,
                    Some(v) => crate::table::IncludeObject::parse(v).ok_or_else(|| {
                        ApiError::bad_request(format!("unrecognized includeObject value: {v:?}"))
                    })?,
                };
                return Ok(Output::Table(include));
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                if param("g") == Some("meta.k8s.io") =>
            {
                return Ok(Output::Metadata);
            }
            Some(_) => continue,
        }
    }
    match unsupported {
        Some(m) if m == "application/vnd.kubernetes.protobuf" => Ok(Output::Json),
        Some(m) => Err(ApiError::not_acceptable(format!(
            "only the following media types are accepted: application/json, application/yaml (got {m})"
        ))),
        None => Ok(Output::Json),
    }
}

/// The kind of body a write carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyType {
    /// JSON (or YAML, converted).
    Object,
    /// RFC 6902.
    JsonPatch,
    /// RFC 7386.
    MergePatch,
    /// Kubernetes strategic merge patch.
    StrategicMergePatch,
    /// Server-side apply.
    ApplyPatch,
}

/// How a body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON.
    Json,
    /// YAML (converted to JSON).
    Yaml,
    /// Kubernetes protobuf (`k8s\0` + `runtime.Unknown`), which kubectl's typed commands send.
    Protobuf,
}

/// Reads `Content-Type`.
pub fn body_type(headers: &HeaderMap) -> ApiResult<(BodyType, Format)> {
    let ct = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let media = ct.split(';').next().unwrap_or("").trim();
    Ok(match media {
        "application/json" | "" | "*/*" => (BodyType::Object, Format::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" => (BodyType::Object, Format::Yaml),
        crate::protobuf::CONTENT_TYPE => (BodyType::Object, Format::Protobuf),
        "application/json-patch+json" => (BodyType::JsonPatch, Format::Json),
        "application/merge-patch+json" => (BodyType::MergePatch, Format::Json),
        "application/strategic-merge-patch+json" => (BodyType::StrategicMergePatch, Format::Json),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
            (BodyType::ApplyPatch, Format::Yaml)
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    })
}

/// Decodes a body into a value; malformed input is a 400.
pub fn decode(body: &Bytes, format: Format) -> ApiResult<Value> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if format == Format::Protobuf {
        return crate::protobuf::decode(body).map_err(|e| ApiError::bad_request(e.to_string()));
    }
    if format == Format::Yaml {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad_request("the YAML body is not UTF-8"))?;
        // yaml.v2, upstream's decoder, keeps the last of two equal keys; Strict and Warn learn
        // of them from [`duplicates`].
        match serde_saphyr::from_str::<Value>(text) {
            Err(e) if yaml_duplicate(&e).is_some() => {
                let mut opts = serde_saphyr::Options::default();
                opts.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
                serde_saphyr::from_str_with_options::<Value>(text, opts)
            }
            other => other,
        }
        .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })
    }
}

/// The duplicate fields of a body, as upstream's strict decoding names them (empty for
/// protobuf, which cannot repeat a field by name). YAML bodies report the first one.
pub fn duplicates(body: &Bytes, format: Format) -> Vec<String> {
    match format {
        Format::Json => crate::strict::json_duplicates(body),
        Format::Yaml => std::str::from_utf8(body)
            .ok()
            .and_then(|text| serde_saphyr::from_str::<Value>(text).err())
            .and_then(|e| yaml_duplicate(&e))
            .into_iter()
            .collect(),
        Format::Protobuf => Vec::new(),
    }
}

/// A YAML duplicate key error as `yaml.v2` words it.
fn yaml_duplicate(mut e: &serde_saphyr::Error) -> Option<String> {
    // The parser wraps its errors with the source lines around them.
    while let serde_saphyr::Error::WithSnippet { error, .. } = e {
        e = error;
    }
    match e {
        serde_saphyr::Error::DuplicateMappingKey { key, location } => Some(
            crate::strict::yaml_duplicate(location.line(), key.as_deref().unwrap_or("")),
        ),
        _ => None,
    }
}

/// Decodes a body that must be a JSON object.
pub fn decode_object(body: &Bytes, format: Format) -> ApiResult<Value> {
    let v = decode(body, format)?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resource_paths() {
        let cases = [
            ("/api/v1/pods", Some(("Pod", None, None, None))),
            (
                "/api/v1/namespaces/default/pods",
                Some(("Pod", Some("default"), None, None)),
            ),
            (
                "/api/v1/namespaces/default/pods/web/status",
                Some(("Pod", Some("default"), Some("web"), Some("status"))),
            ),
            (
                "/api/v1/namespaces/default/pods/web/binding",
                Some(("Pod", Some("default"), Some("web"), Some("binding"))),
            ),
            ("/api/v1/namespaces", Some(("Namespace", None, None, None))),
            (
                "/api/v1/namespaces/kube-system",
                Some(("Namespace", None, Some("kube-system"), None)),
            ),
            (
                "/api/v1/namespaces/x/status",
                Some(("Namespace", None, Some("x"), Some("status"))),
            ),
            (
                "/api/v1/nodes/node-0/status",
                Some(("Node", None, Some("node-0"), Some("status"))),
            ),
            (
                "/apis/apps/v1/namespaces/ns/deployments/web/scale",
                Some(("Deployment", Some("ns"), Some("web"), Some("scale"))),
            ),
            (
                "/apis/apps/v1/deployments",
                Some(("Deployment", None, None, None)),
            ),
            (
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n",
                Some(("Lease", Some("kube-node-lease"), Some("n"), None)),
            ),
            ("/apis/apps/v1/namespaces/ns/daemonsets/x/scale", None),
            ("/apis/apps/v2/deployments", None),
            ("/api/v1/namespaces/default/nodes", None),
            ("/api/v1/widgets", None),
        ];
        let registry = Registry::new();
        for (path, want) in cases {
            let got = parse_path(&registry, path).map(|t| {
                (
                    t.def.kind.clone(),
                    t.namespace,
                    t.name,
                    t.sub.map(|s| s.name()),
                )
            });
            let want = want.map(
                |(k, ns, n, s): (&str, Option<&str>, Option<&str>, Option<&str>)| {
                    (
                        k.to_string(),
                        ns.map(str::to_string),
                        n.map(str::to_string),
                        s,
                    )
                },
            );
            assert_eq!(got, want, "{path}");
        }
    }

    #[test]
    fn parses_query_parameters() {
        let p = Params::parse(Some("labelSelector=app%3Dweb%2Ctier+in+(a)&limit=5&continue=abc&watch=1&fieldSelector=spec.nodeName%3Dn1")).unwrap();
        assert_eq!(p.label_selector.as_deref(), Some("app=web,tier in (a)"));
        assert_eq!(p.limit().unwrap(), 5);
        assert_eq!(p.continue_token.as_deref(), Some("abc"));
        assert!(p.is_watch());
        assert_eq!(p.field_selector.as_deref(), Some("spec.nodeName=n1"));
        assert!(Params::parse(Some("limit=x")).unwrap().limit().is_err());
        assert!(
            Params::parse(Some("dryRun=Some"))
                .unwrap()
                .dry_run()
                .is_err()
        );
        assert!(
            Params::parse(Some("dryRun=All"))
                .unwrap()
                .dry_run()
                .unwrap()
        );
    }

    #[test]
    fn negotiates_tables_and_json() {
        let mut h = HeaderMap::new();
        assert_eq!(negotiate(&h, None).unwrap(), Output::Json);
        h.insert("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json".parse().unwrap());
        assert_eq!(
            negotiate(&h, None).unwrap(),
            Output::Table(crate::table::IncludeObject::Metadata)
        );
        h.insert(
            "accept",
            "application/vnd.kubernetes.protobuf, */*".parse().unwrap(),
        );
        assert_eq!(negotiate(&h, None).unwrap(), Output::Json);
        h.insert("accept", "text/html".parse().unwrap());
        assert!(negotiate(&h, None).is_err());
    }

    #[test]
    fn decodes_json_and_yaml_and_rejects_garbage() {
        let y = decode_object(
            &Bytes::from_static(b"kind: Pod\nmetadata:\n  name: x\n"),
            Format::Yaml,
        )
        .unwrap();
        assert_eq!(y["metadata"]["name"], "x");
        assert!(decode_object(&Bytes::from_static(b"{\"kind\":"), Format::Json).is_err());
        assert!(decode_object(&Bytes::from_static(b"[1]"), Format::Json).is_err());
    }
}
