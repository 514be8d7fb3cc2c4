//! Comparing two normalized answers, and the list of differences known and accepted.
//!
//! A difference has a class, `<step label> <aspect>` (e.g. `create/pods/valid status` or
//! `get/deployments/get body:spec.progressDeadlineSeconds`), so that thousands of sequences
//! reduce to a short list, and so that known differences can be named by a glob over classes.
//!
//! Once the servers answer a write differently (one created the object, the other refused), the
//! rest of the sequence runs on different state: later differences are marked `consequential`,
//! reported but not classified, as they follow from the first.

use crate::sequence::{Answer, Sequence};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// One difference between the answers to one step.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Difference {
    /// The sequence's seed.
    pub seed: u64,
    /// The step's index.
    pub step: usize,
    /// The step's label.
    pub label: String,
    /// The request line (references unresolved).
    pub request: String,
    /// What differs: `status:<a>/<b>`, `reason`, `causes:<reasons>`, `message`, `details[.key]`,
    /// `warnings`,
    /// `body-kind`, `body:<path>`, `watch:types`, `watch:<path>`, `sentinel`.
    pub aspect: String,
    /// The first side's value there (A, or the recorded upstream answer on replay).
    pub a: Value,
    /// The second side's value (B, or the server replayed against).
    pub b: Value,
    /// After the servers' states diverged on an earlier step.
    pub consequential: bool,
}

impl Difference {
    /// `<label> <aspect>`, what known differences match.
    pub fn class(&self) -> String {
        format!("{} {}", self.label, self.aspect)
    }
}

/// The differences between two sides' normalized answers to `seq`.
pub fn sequence(seq: &Sequence, a: &[Answer], b: &[Answer]) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut diverged = false;
    for (i, step) in seq.steps.iter().enumerate() {
        let (Some(x), Some(y)) = (a.get(i), b.get(i)) else {
            break;
        };
        let mut found = Vec::new();
        answers(x, y, &mut found);
        let writes = step.request.method != "GET";
        let split = (writes && x.status != y.status)
            || x.sentinel.as_ref().map(|s| s.status) != y.sentinel.as_ref().map(|s| s.status);
        for (aspect, va, vb) in found {
            out.push(Difference {
                seed: seq.seed,
                step: i,
                label: step.label.clone(),
                request: step.request.line(),
                aspect,
                a: va,
                b: vb,
                consequential: diverged,
            });
        }
        diverged |= split;
    }
    out
}

/// The differences between two answers: aspect, A's value, B's value.
pub fn answers(a: &Answer, b: &Answer, out: &mut Vec<(String, Value, Value)>) {
    if a.status != b.status {
        // The codes are part of the class: "403 where upstream says 422" and "201 where upstream
        // says 422" are different defects.
        out.push((
            format!("status:{}/{}", a.status, b.status),
            summary(a),
            summary(b),
        ));
        return;
    }
    if a.warnings != b.warnings {
        out.push((
            "warnings".into(),
            a.warnings.clone().into(),
            b.warnings.clone().into(),
        ));
    }
    match (&a.sentinel, &b.sentinel) {
        (Some(x), Some(y)) if x.status != y.status => {
            out.push(("sentinel".into(), summary(x), summary(y)));
        }
        _ => {}
    }
    let (ka, kb) = (kind(&a.body), kind(&b.body));
    if ka == "Status" && kb == "Status" {
        status_objects(&a.body, &b.body, out);
    } else if ka != kb {
        out.push(("body-kind".into(), summary(a), summary(b)));
    } else {
        let mut diffs = Vec::new();
        json(&mut String::new(), &a.body, &b.body, &mut diffs);
        group(diffs, "body:", out);
    }
    match (&a.events, &b.events) {
        (Some(x), Some(y)) => {
            let ta: Vec<Value> = x.iter().map(event_type).collect();
            let tb: Vec<Value> = y.iter().map(event_type).collect();
            if ta != tb {
                out.push(("watch:types".into(), ta.into(), tb.into()));
            } else {
                let mut diffs = Vec::new();
                for (i, (ex, ey)) in x.iter().zip(y).enumerate() {
                    let mut p = format!("[{i}]");
                    json(&mut p, ex, ey, &mut diffs);
                }
                group(diffs, "watch:", out);
            }
        }
        (None, None) => {}
        (x, y) => out.push((
            "watch:types".into(),
            serde_json::to_value(x).unwrap_or_default(),
            serde_json::to_value(y).unwrap_or_default(),
        )),
    }
}

fn event_type(e: &Value) -> Value {
    e.get("type").cloned().unwrap_or_else(|| e.clone())
}

fn kind(v: &Value) -> String {
    match v {
        Value::Object(m) => m
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("<no kind>")
            .to_string(),
        Value::Null => "<empty>".into(),
        Value::String(_) => "<text>".into(),
        _ => "<other>".into(),
    }
}

/// A short form of an answer for reports: status, and the body's kind, reason and message or the
/// whole body when small.
fn summary(a: &Answer) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("status".into(), a.status.into());
    match &a.body {
        Value::Object(o) if o.get("kind").and_then(Value::as_str) == Some("Status") => {
            for k in ["reason", "message", "details"] {
                if let Some(v) = o.get(k) {
                    m.insert(k.into(), v.clone());
                }
            }
        }
        Value::Object(o) => {
            m.insert("kind".into(), kind(&a.body).into());
            if let Some(meta) = o.get("metadata") {
                m.insert("metadata".into(), meta.clone());
            }
        }
        Value::Null => {}
        other => {
            m.insert("body".into(), other.clone());
        }
    }
    if !a.warnings.is_empty() {
        m.insert("warnings".into(), a.warnings.clone().into());
    }
    Value::Object(m)
}

fn status_objects(a: &Value, b: &Value, out: &mut Vec<(String, Value, Value)>) {
    let get = |v: &Value, k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    for k in ["status", "code"] {
        if get(a, k) != get(b, k) {
            out.push((format!("body:{k}"), get(a, k), get(b, k)));
        }
    }
    if get(a, "reason") != get(b, "reason") {
        out.push(("reason".into(), get(a, "reason"), get(b, "reason")));
    }
    let causes = |v: &Value| -> Value {
        let set: BTreeSet<(String, String)> = v
            .pointer("/details/causes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                (s("field"), s("reason"))
            })
            .collect();
        set.into_iter()
            .map(|(f, r)| Value::String(format!("{f} {r}")))
            .collect()
    };
    let (ca, cb) = (causes(a), causes(b));
    if ca != cb {
        // The reasons only one side gives name the class (`causes:NamespaceTerminating`).
        let reasons = |x: &Value, y: &Value| -> BTreeSet<String> {
            let ys: Vec<&Value> = y.as_array().into_iter().flatten().collect();
            x.as_array()
                .into_iter()
                .flatten()
                .filter(|c| !ys.contains(c))
                .filter_map(|c| c.as_str()?.rsplit(' ').next().map(str::to_string))
                .collect()
        };
        let mut only: BTreeSet<String> = reasons(&ca, &cb);
        only.extend(reasons(&cb, &ca));
        let names: Vec<String> = only.into_iter().collect();
        out.push((format!("causes:{}", names.join(",")), ca, cb));
    }
    if get(a, "message") != get(b, "message") {
        out.push(("message".into(), get(a, "message"), get(b, "message")));
    }
    // Each key of `details` is its own aspect: one server leaving out `group: ""` must not hide
    // another difference in `uid` or `name`.
    let details = |v: &Value| -> serde_json::Map<String, Value> {
        let mut d = v
            .get("details")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        d.remove("causes");
        d
    };
    if a.get("details").is_some() != b.get("details").is_some() {
        // One side has no details at all: one difference, not one per key.
        out.push(("details".into(), get(a, "details"), get(b, "details")));
        return;
    }
    let (da, db) = (details(a), details(b));
    let keys: BTreeSet<&String> = da.keys().chain(db.keys()).collect();
    for k in keys {
        let absent = || Value::String("<absent>".into());
        let (x, y) = (
            da.get(k).cloned().unwrap_or_else(absent),
            db.get(k).cloned().unwrap_or_else(absent),
        );
        if x != y {
            out.push((format!("details.{k}"), x, y));
        }
    }
}

/// Leaf differences between two JSON values: (concrete path, a, b); an absent side is
/// `"<absent>"`.
fn json(path: &mut String, a: &Value, b: &Value, out: &mut Vec<(String, Value, Value)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => json(path, p, q, out),
                    (p, q) => out.push((
                        path.clone(),
                        p.cloned().unwrap_or_else(|| "<absent>".into()),
                        q.cloned().unwrap_or_else(|| "<absent>".into()),
                    )),
                }
                path.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                match (x.get(i), y.get(i)) {
                    (Some(p), Some(q)) => json(path, p, q, out),
                    (p, q) => out.push((
                        path.clone(),
                        p.cloned().unwrap_or_else(|| "<absent>".into()),
                        q.cloned().unwrap_or_else(|| "<absent>".into()),
                    )),
                }
                path.truncate(len);
            }
        }
        (x, y) if x != y => out.push((path.clone(), x.clone(), y.clone())),
        _ => {}
    }
}

/// Keys below which names are data, not schema: a difference under them is classed by the
/// container (`metadata.labels`), not by each key.
const DATA_MAPS: [&str; 8] = [
    "labels",
    "annotations",
    "data",
    "stringData",
    "fieldsV1",
    "matchLabels",
    "selector",
    "nodeSelector",
];

/// The class path of a concrete path: indices become `[*]`, and paths end at a data map.
pub fn general_path(path: &str) -> String {
    let mut out = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '[' {
            out.push_str("[*]");
            for d in chars.by_ref() {
                if d == ']' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    let mut kept = Vec::new();
    for seg in out.split('.') {
        kept.push(seg);
        if DATA_MAPS.contains(&seg.trim_end_matches("[*]")) {
            break;
        }
    }
    kept.join(".")
}

/// Groups leaf differences by class path; each group keeps its first example, with its concrete
/// path.
fn group(diffs: Vec<(String, Value, Value)>, prefix: &str, out: &mut Vec<(String, Value, Value)>) {
    let mut seen: Vec<String> = Vec::new();
    for (path, a, b) in diffs {
        let g = general_path(&path);
        if seen.contains(&g) {
            continue;
        }
        seen.push(g.clone());
        let wrap = |v: Value| serde_json::json!({"at": path, "value": v});
        out.push((format!("{prefix}{g}"), wrap(a), wrap(b)));
    }
}

/// Differences accepted on purpose, each with its reason (KNOWN-DIFFERENCES.md).
#[derive(Clone, Debug, Default)]
pub struct Known {
    entries: Vec<(String, String)>,
}

impl Known {
    /// Parses the rows of the markdown table whose first cell is a backquoted class glob:
    /// ``| `create/pods/* status` | why |``. Other lines are prose.
    pub fn parse(text: &str) -> Self {
        let entries = text
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let rest = l.strip_prefix("| `")?;
                let (pattern, rest) = rest.split_once('`')?;
                let reason = rest.trim_start_matches([' ', '|']);
                let reason = reason.trim_end_matches([' ', '|']);
                Some((pattern.to_string(), reason.to_string()))
            })
            .collect();
        Known { entries }
    }

    /// The reason `d` is accepted, if it is.
    pub fn reason(&self, d: &Difference) -> Option<&str> {
        let class = d.class();
        self.entries
            .iter()
            .find(|(p, _)| glob(p, &class))
            .map(|(_, r)| r.as_str())
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let mut rest = s;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else if let Some(at) = rest.find(part) {
            rest = &rest[at + part.len()..];
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn globs() {
        assert!(glob("create/* status", "create/pods/valid status"));
        assert!(glob("*", "x"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b*c", "aXXbYY"));
        assert!(!glob(
            "create/pods/valid status",
            "create/pods/valid message"
        ));
    }

    #[test]
    fn paths_are_generalized() {
        assert_eq!(
            general_path("spec.template.spec.containers[0].image"),
            "spec.template.spec.containers[*].image"
        );
        assert_eq!(general_path("metadata.labels.app"), "metadata.labels");
        assert_eq!(
            general_path("items[3].metadata.managedFields[0].fieldsV1.f:data.f:k"),
            "items[*].metadata.managedFields[*].fieldsV1"
        );
    }

    #[test]
    fn known_rows_parse_and_match() {
        let k = Known::parse(
            "# title\n\n| class | reason |\n| --- | --- |\n| `create/pods/* message` | upstream prints Go types |\n",
        );
        assert_eq!(k.len(), 1);
        let d = Difference {
            seed: 1,
            step: 2,
            label: "create/pods/bad-name".into(),
            request: String::new(),
            aspect: "message".into(),
            a: Value::Null,
            b: Value::Null,
            consequential: false,
        };
        assert_eq!(k.reason(&d), Some("upstream prints Go types"));
    }

    #[test]
    fn status_causes_compare_as_sets_and_bodies_by_path() {
        let a = Answer {
            status: 422,
            body: json!({"kind": "Status", "reason": "Invalid", "message": "m",
                "details": {"causes": [{"field": "metadata.name", "reason": "FieldValueInvalid"}]}}),
            ..Default::default()
        };
        let mut b = a.clone();
        b.body["details"]["causes"][0]["reason"] = json!("FieldValueRequired");
        let mut out = Vec::new();
        answers(&a, &b, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, "causes:FieldValueInvalid,FieldValueRequired");

        let x = Answer {
            status: 200,
            body: json!({"kind": "ConfigMap", "data": {"k": "1"}, "spec": {"a": [1, 2]}}),
            ..Default::default()
        };
        let y = Answer {
            status: 200,
            body: json!({"kind": "ConfigMap", "data": {"k": "2"}, "spec": {"a": [1]}}),
            ..Default::default()
        };
        let mut out = Vec::new();
        answers(&x, &y, &mut out);
        let aspects: Vec<&str> = out.iter().map(|d| d.0.as_str()).collect();
        assert_eq!(aspects, ["body:data", "body:spec.a[*]"]);
    }
}
