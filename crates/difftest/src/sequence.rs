//! What a sequence is: requests as data, so that the corpus stores exactly what was sent and a
//! replay does not depend on the generator staying the same.
//!
//! Requests name values that only the server knows (resourceVersions, uids, generated names,
//! continue tokens) by reference, `{{rv:configmaps/alpha}}` and the like; each side resolves them
//! from its own earlier answers (see [`crate::run`]). The namespace is `{{ns}}`, so one server can
//! run the same seed twice under a different suffix.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One randomized sequence of requests, all in one namespace.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Sequence {
    /// The seed it was generated from.
    pub seed: u64,
    /// Its namespace's canonical name (`dt-<seed>`); answers are normalized to it.
    pub namespace: String,
    /// The requests, in order.
    pub steps: Vec<Step>,
}

/// One request of a sequence and what kind of request it is.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Step {
    /// The kind of request, `verb/resource/variant` (e.g. `create/pods/bad-name`): differences are
    /// grouped by it, and known differences name it.
    pub label: String,
    /// What is sent.
    pub request: Request,
}

/// An HTTP request with references still unresolved.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Request {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The path, e.g. `/api/v1/namespaces/{{ns}}/configmaps/alpha`.
    pub path: String,
    /// Query parameters in order; values may hold references.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<(String, String)>,
    /// The body's content type, when there is a body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The body as text: some bodies are deliberately not valid JSON objects (duplicate fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The object this request is about (`configmaps/alpha`), so each side remembers its
    /// resourceVersions and uid from the answer; lists record each item under `plural/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracks: Option<String>,
    /// Set for a watch: how to make it end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchEnd>,
}

/// How a watch ends: after the watch is open the runner creates a sentinel object the watch
/// selects, and reads events until the sentinel's arrives (or the watch's `timeoutSeconds` ends
/// it). Waiting for the sentinel instead of a fixed time keeps runs fast and deterministic: every
/// event before the sentinel's has been delivered by then.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WatchEnd {
    /// The create request for the sentinel.
    pub sentinel: Box<Request>,
    /// The sentinel's name.
    pub sentinel_name: String,
    /// Whether the watch starts with the current state (no resourceVersion, or `0`): upstream
    /// sends those ADDED events in no defined order, so they are compared sorted by name.
    #[serde(default)]
    pub sort_initial: bool,
}

/// A server's answer to one request.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Answer {
    /// The HTTP status; 0 when the request failed below HTTP.
    pub status: u16,
    /// The body: JSON when it parses, otherwise its text.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub body: Value,
    /// The texts of `Warning` headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// A watch's events, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Value>>,
    /// A watch's sentinel create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel: Option<Box<Answer>>,
}

impl Request {
    /// A request without body or query.
    pub fn new(method: &str, path: impl Into<String>) -> Self {
        Request {
            method: method.to_string(),
            path: path.into(),
            query: Vec::new(),
            content_type: None,
            body: None,
            tracks: None,
            watch: None,
        }
    }

    /// Adds a query parameter.
    pub fn q(mut self, key: &str, value: impl Into<String>) -> Self {
        self.query.push((key.to_string(), value.into()));
        self
    }

    /// Sets a JSON body with `application/json`.
    pub fn json(self, body: &Value) -> Self {
        self.body_as("application/json", body.to_string())
    }

    /// Sets a body of the given content type.
    pub fn body_as(mut self, content_type: &str, body: String) -> Self {
        self.content_type = Some(content_type.to_string());
        self.body = Some(body);
        self
    }

    /// Names the object the answer is about.
    pub fn tracking(mut self, key: impl Into<String>) -> Self {
        self.tracks = Some(key.into());
        self
    }

    /// The request line for a report: method, path and query, references unresolved.
    pub fn line(&self) -> String {
        let mut s = format!("{} {}", self.method, self.path);
        for (i, (k, v)) in self.query.iter().enumerate() {
            s.push(if i == 0 { '?' } else { '&' });
            s.push_str(k);
            s.push('=');
            s.push_str(v);
        }
        s
    }
}
