//! Running a sequence against one server.
//!
//! A [`Target`] is a `kube::Client`, so the same code reaches a server named by a kubeconfig
//! (bearer token, TLS) and rollwright's in-process router (the CI replay, no port). Requests go
//! out raw (`Client::send`): the point is to see each server's own status, body and headers, not
//! what a typed client makes of them.

use crate::Error;
use crate::sequence::{Answer, Request, Sequence};
use bytes::Bytes;
use http_body_util::BodyExt;
use kube::Client;
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// The agent every request names; servers derive the default field manager (`difftest`) from it.
pub const USER_AGENT: &str = "difftest/0.1";
/// How long one ordinary request may take before the sequence is abandoned.
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);
/// How long a watch is read at most; the watch's own `timeoutSeconds` (2) normally ends it first.
const WATCH_DEADLINE: Duration = Duration::from_secs(5);

/// A server to run sequences against.
#[derive(Clone)]
pub struct Target {
    client: Client,
}

impl Target {
    /// A server named by a kubeconfig file (its current context).
    pub async fn from_kubeconfig(path: &Path) -> Result<Self, Error> {
        let kc = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        let client = Client::try_from(config).map_err(|e| Error::Config(e.to_string()))?;
        Ok(Target { client })
    }

    /// Rollwright's API server in this process, over a fresh memory store, configured as
    /// upstream's bare kube-apiserver is: ServiceAccount admission on (upstream runs it whether
    /// or not a controller creates ServiceAccounts). No port, no TLS: what CI replays against.
    pub async fn in_process() -> Result<Self, Error> {
        let store: Arc<dyn store::Store> = Arc::new(store::memory::MemoryStore::new());
        let opts = apiserver::ServerOptions {
            service_accounts: true,
            ..Default::default()
        };
        let server = apiserver::ApiServer::start(store, opts)
            .await
            .map_err(|e| Error::Config(format!("starting rollwright's API server: {e}")))?;
        Ok(Target {
            client: Client::new(server.in_process_router(), "default"),
        })
    }

    /// A kubeconfig file's server, or `in-process` for [`Target::in_process`].
    pub async fn named(name: &Path) -> Result<Self, Error> {
        if name.as_os_str() == "in-process" {
            Self::in_process().await
        } else {
            Self::from_kubeconfig(name).await
        }
    }

    /// A server reached through an existing client (rollwright's in-process router in tests).
    pub fn from_client(client: Client) -> Self {
        Target { client }
    }

    async fn send(&self, req: &Resolved) -> Result<http::Response<kube::client::Body>, Error> {
        let mut uri = req.path.clone();
        for (i, (k, v)) in req.query.iter().enumerate() {
            uri.push(if i == 0 { '?' } else { '&' });
            uri.push_str(&encode(k));
            uri.push('=');
            uri.push_str(&encode(v));
        }
        let mut b = http::Request::builder()
            .method(req.method.as_str())
            .uri(&uri)
            .header("accept", "application/json")
            // Without one, upstream names the field manager `unknown`: a fixed agent keeps
            // managedFields comparable (the empty-agent case is in README.md's list).
            .header("user-agent", USER_AGENT);
        if let Some(ct) = &req.content_type {
            b = b.header("content-type", ct);
        }
        let body = req.body.clone().unwrap_or_default().into_bytes();
        let request = b
            .body(kube::client::Body::from(body))
            .map_err(|e| Error::Request(format!("{uri}: {e}")))?;
        match tokio::time::timeout(REQUEST_DEADLINE, self.client.send(request)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(Error::Request(format!("{} {uri}: {e}", req.method))),
            Err(_) => Err(Error::Request(format!(
                "{} {uri}: no answer in time",
                req.method
            ))),
        }
    }

    /// One request, its whole answer.
    async fn call(&self, req: &Resolved) -> Result<Answer, Error> {
        let resp = self.send(req).await?;
        let (status, warnings) = head(&resp);
        let bytes = tokio::time::timeout(REQUEST_DEADLINE, resp.into_body().collect())
            .await
            .map_err(|_| Error::Request(format!("{}: body not complete in time", req.path)))?
            .map_err(|e| Error::Request(format!("{}: {e}", req.path)))?
            .to_bytes();
        Ok(Answer {
            status,
            body: parse_body(&bytes),
            warnings,
            events: None,
            sentinel: None,
        })
    }

    /// A watch: open it, create the sentinel, read events until the sentinel's.
    async fn watch(
        &self,
        req: &Resolved,
        sentinel: &Resolved,
        name: &str,
    ) -> Result<Answer, Error> {
        let resp = self.send(req).await?;
        let (status, warnings) = head(&resp);
        if status != 200 {
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| Error::Request(format!("{}: {e}", req.path)))?
                .to_bytes();
            let sentinel = self.call(sentinel).await?;
            return Ok(Answer {
                status,
                body: parse_body(&bytes),
                warnings,
                events: None,
                sentinel: Some(Box::new(sentinel)),
            });
        }
        let sentinel_answer = self.call(sentinel).await?;
        let mut body = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + WATCH_DEADLINE;
        'read: loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) | Ok(None) => break,
                Ok(Some(Err(e))) => {
                    events.push(Value::String(format!("stream error: {e}")));
                    break;
                }
                Ok(Some(Ok(f))) => f,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buf.extend_from_slice(&data);
            while let Some(at) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=at).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let ev = parse_body(&Bytes::from(line));
                let done = ev
                    .pointer("/object/metadata/name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n == name);
                events.push(ev);
                if done {
                    break 'read;
                }
            }
        }
        if !buf.iter().all(u8::is_ascii_whitespace) {
            events.push(parse_body(&Bytes::from(buf)));
        }
        Ok(Answer {
            status,
            body: Value::Null,
            warnings,
            events: Some(events),
            sentinel: Some(Box::new(sentinel_answer)),
        })
    }

    /// Runs `seq` in namespace `namespace` (its canonical name plus a run's suffix); the raw
    /// answers, one per step. A request that fails below HTTP ends the sequence with an error.
    pub async fn run(&self, seq: &Sequence, namespace: &str) -> Result<Vec<Answer>, Error> {
        let mut refs = Refs::new(namespace);
        let mut answers = Vec::with_capacity(seq.steps.len());
        for step in &seq.steps {
            let req = refs.resolve(&step.request);
            let answer = match &step.request.watch {
                Some(w) => {
                    let sentinel = refs.resolve(&w.sentinel);
                    let a = self.watch(&req, &sentinel, &w.sentinel_name).await?;
                    if let Some(s) = &a.sentinel {
                        refs.record(&w.sentinel, s, false);
                    }
                    a
                }
                None => self.call(&req).await?,
            };
            refs.record(&step.request, &answer, true);
            answers.push(answer);
        }
        Ok(answers)
    }
}

fn head(resp: &http::Response<kube::client::Body>) -> (u16, Vec<String>) {
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(warning_text)
        .collect();
    (resp.status().as_u16(), warnings)
}

/// The text of a `Warning: 299 - "text"` header; the code and agent are not compared.
fn warning_text(header: &str) -> String {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)""#).unwrap_or_else(|_| unreachable!())
    });
    match RE.captures(header) {
        Some(c) => c[1].replace("\\\"", "\"").replace("\\\\", "\\"),
        None => header.to_string(),
    }
}

fn parse_body(bytes: &Bytes) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).trim().to_string()))
}

/// Percent-encodes a query component (RFC 3986 unreserved characters pass).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A request with its references replaced by this side's values.
#[derive(Debug, Clone)]
struct Resolved {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    content_type: Option<String>,
    body: Option<String>,
}

/// What one side has seen so far, to resolve references: each object's resourceVersions (in the
/// order seen) and uid, and each step's answer.
struct Refs {
    namespace: String,
    objects: HashMap<String, (Vec<String>, Option<String>)>,
    answers: Vec<Value>,
    /// The last object resourceVersion seen: what `{{resp-rv:N}}` falls back to when step N's
    /// answer has none (it failed), so that a watch never starts from a made-up future version.
    last_rv: Option<String>,
}

/// Stand-ins for a reference this side cannot resolve (the object was never seen): fixed, so both
/// sides send the same request.
const UNKNOWN_RV: &str = "999999999";
const UNKNOWN_UID: &str = "00000000-0000-0000-0000-000000000000";

impl Refs {
    fn new(namespace: &str) -> Self {
        Refs {
            namespace: namespace.to_string(),
            objects: HashMap::new(),
            answers: Vec::new(),
            last_rv: None,
        }
    }

    fn resolve(&self, r: &Request) -> Resolved {
        Resolved {
            method: r.method.clone(),
            path: self.text(&r.path),
            query: r
                .query
                .iter()
                .map(|(k, v)| (k.clone(), self.text(v)))
                .collect(),
            content_type: r.content_type.clone(),
            body: r.body.as_deref().map(|b| self.text(b)),
        }
    }

    fn text(&self, s: &str) -> String {
        static RE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"\{\{([a-z-]+)(?::([^}]*))?\}\}").unwrap_or_else(|_| unreachable!())
        });
        RE.replace_all(s, |c: &regex::Captures| {
            let arg = c.get(2).map_or("", |m| m.as_str());
            match &c[1] {
                "ns" => self.namespace.clone(),
                "rv" => self
                    .objects
                    .get(arg)
                    .and_then(|o| o.0.last().cloned())
                    .unwrap_or_else(|| UNKNOWN_RV.into()),
                "oldrv" => self
                    .objects
                    .get(arg)
                    .and_then(|o| o.0.first().cloned())
                    .unwrap_or_else(|| UNKNOWN_RV.into()),
                "uid" => self
                    .objects
                    .get(arg)
                    .and_then(|o| o.1.clone())
                    .unwrap_or_else(|| UNKNOWN_UID.into()),
                "resp-rv" => self
                    .answer(arg)
                    .and_then(|a| a.pointer("/metadata/resourceVersion"))
                    .and_then(Value::as_str)
                    .filter(|rv| !rv.is_empty())
                    .or(self.last_rv.as_deref())
                    .unwrap_or(UNKNOWN_RV)
                    .to_string(),
                "continue" => self
                    .answer(arg)
                    .and_then(|a| a.pointer("/metadata/continue"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                other => format!("{{{{{other}}}}}"),
            }
        })
        .into_owned()
    }

    fn answer(&self, index: &str) -> Option<&Value> {
        index
            .parse::<usize>()
            .ok()
            .and_then(|i| self.answers.get(i))
    }

    /// Remembers `answer`'s objects, and the answer itself when it is a step's own (`slot`), so
    /// that `{{resp-rv:N}}` names step N.
    fn record(&mut self, req: &Request, answer: &Answer, slot: bool) {
        let body = &answer.body;
        let dry = req.query.iter().any(|(k, v)| k == "dryRun" && v == "All");
        if (200..300).contains(&answer.status) && !dry {
            if let (Some(items), Some(plural)) =
                (body.get("items").and_then(Value::as_array), &req.tracks)
            {
                for item in items {
                    if let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) {
                        self.object(&format!("{plural}/{name}"), item);
                    }
                }
            } else if let Some(key) = &req.tracks
                && body.get("kind").and_then(Value::as_str) != Some("Status")
            {
                self.object(key, body);
            }
        }
        if (200..300).contains(&answer.status)
            && !dry
            && let Some(rv) = body
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            && !rv.is_empty()
        {
            self.last_rv = Some(rv.to_string());
        }
        if slot {
            self.answers.push(body.clone());
        }
    }

    fn object(&mut self, key: &str, obj: &Value) {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        let uid = obj.pointer("/metadata/uid").and_then(Value::as_str);
        let entry = self.objects.entry(key.to_string()).or_default();
        if let Some(uid) = uid {
            if entry.1.as_deref() != Some(uid) {
                // A new object under an old name: its history starts again.
                entry.0.clear();
            }
            entry.1 = Some(uid.to_string());
        }
        if let Some(rv) = rv {
            self.last_rv = Some(rv.to_string());
        }
        if let Some(rv) = rv
            && entry.0.last().map(String::as_str) != Some(rv)
        {
            entry.0.push(rv.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_lose_code_and_agent() {
        assert_eq!(
            warning_text(r#"299 - "unknown field \"spec.x\"""#),
            r#"unknown field "spec.x""#
        );
        assert_eq!(warning_text("odd"), "odd");
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode("tier in (fe,be)"), "tier%20in%20%28fe%2Cbe%29");
    }

    #[test]
    fn references_resolve_from_what_was_seen() {
        let mut refs = Refs::new("dt-1");
        let create = Request::new("POST", "/x").tracking("configmaps/a");
        let obj =
            serde_json::json!({"metadata": {"name": "a", "uid": "u1", "resourceVersion": "5"}});
        refs.record(
            &create,
            &Answer {
                status: 201,
                body: obj,
                ..Default::default()
            },
            true,
        );
        let upd =
            serde_json::json!({"metadata": {"name": "a", "uid": "u1", "resourceVersion": "7"}});
        refs.record(
            &create,
            &Answer {
                status: 200,
                body: upd,
                ..Default::default()
            },
            true,
        );
        assert_eq!(
            refs.text("{{ns}} {{rv:configmaps/a}} {{oldrv:configmaps/a}} {{uid:configmaps/a}}"),
            "dt-1 7 5 u1"
        );
        assert_eq!(
            refs.text("{{resp-rv:1}} {{rv:configmaps/b}}"),
            "7 999999999"
        );
        refs.record(
            &create,
            &Answer {
                status: 404,
                body: serde_json::json!({"kind": "Status"}),
                ..Default::default()
            },
            true,
        );
        assert_eq!(
            refs.text("{{resp-rv:2}}"),
            "7",
            "a failed step's version is the last one seen"
        );
    }
}
