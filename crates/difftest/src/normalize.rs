//! Normalizing answers so that two servers' can be compared.
//!
//! What is the server's own choice, and may differ between two correct servers, becomes a
//! symbol: uids and object resourceVersions are numbered in order of first appearance within the
//! sequence (so "the same RV as step 3's answer" still compares), timestamps become `<time>`,
//! generated names `prefix<gen1>`, a list's own resourceVersion `<list-rv>` (upstream's is etcd's
//! global revision, moved by writes elsewhere) and continue tokens `<continue>`. Everything else
//! is compared as the server sent it.
//!
//! Symbols are assigned walking each document with its keys sorted, so that two servers that
//! order JSON keys differently still number the same things the same way.

use crate::sequence::Answer;
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::LazyLock;

fn re(s: &str) -> Regex {
    Regex::new(s).unwrap_or_else(|e| unreachable!("{e}"))
}

static TIME: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"));
static UUID: LazyLock<Regex> =
    LazyLock::new(|| re(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"));
static TOKEN_VOLUME: LazyLock<Regex> = LazyLock::new(|| re(r"kube-api-access-[a-z0-9]{5}"));
/// A resourceVersion quoted in a message ("ResourceVersion in precondition: 12, ...").
static MESSAGE_RV: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)(resource ?version[^0-9]{0,40}?)(\d+)"));
/// A timestamp inside a text (an object quoted in a message).
static TEXT_TIME: LazyLock<Regex> =
    LazyLock::new(|| re(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"));
/// Where one error of an aggregate (`X is invalid: [e1, e2]`) starts: a field path and a reason.
static ERROR_START: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^[a-zA-Z][\w.\[\]/-]*: (Invalid value|Required value|Forbidden|Unsupported value|Duplicate value|Too long|Too many|Not found|Internal error)",
    )
});

/// One side's normalizer for one sequence: symbols are numbered across the whole sequence.
#[derive(Debug, Default)]
pub struct Normalizer {
    namespace_actual: String,
    namespace: String,
    uids: HashMap<String, String>,
    rvs: HashMap<String, String>,
    generated: Vec<(String, String)>,
    /// The step being normalized, and how many symbols it introduced so far.
    step: usize,
    fresh: usize,
}

impl Normalizer {
    /// A normalizer for a sequence run in namespace `actual`, reported as `canonical`.
    pub fn new(actual: &str, canonical: &str) -> Self {
        Normalizer {
            namespace_actual: actual.to_string(),
            namespace: canonical.to_string(),
            ..Default::default()
        }
    }

    /// The normalized form of the answer to step `step`; call in step order. `sort_initial`
    /// sorts the ADDED events a watch starts with by name (upstream sends them in no defined
    /// order).
    pub fn answer(&mut self, step: usize, a: &Answer, sort_initial: bool) -> Answer {
        if step != self.step {
            self.step = step;
            self.fresh = 0;
        }
        let mut events = a.events.clone();
        if let Some(ev) = events.as_mut()
            && sort_initial
        {
            let n = ev
                .iter()
                .take_while(|e| e.get("type").and_then(Value::as_str) == Some("ADDED"))
                .count();
            ev[..n].sort_by(|x, y| name_of(x).cmp(name_of(y)));
        }
        self.collect(&a.body, false);
        for e in events.iter().flatten() {
            self.collect(e, false);
        }
        let sentinel = a
            .sentinel
            .as_ref()
            .map(|s| Box::new(self.answer(step, s, false)));
        let mut body = self.transform(&a.body, None, false);
        sort_generated_items(&mut body);
        sort_managed_fields(&mut body);
        Answer {
            status: a.status,
            body,
            warnings: a.warnings.iter().map(|w| self.text(w, true)).collect(),
            events: events.map(|ev| {
                ev.iter()
                    .map(|e| {
                        let mut e = self.transform(e, None, false);
                        sort_managed_fields(&mut e);
                        if e.get("type").and_then(Value::as_str) == Some("BOOKMARK")
                            && let Some(m) = e.pointer_mut("/object/metadata")
                            && let Some(rv) = m.get_mut("resourceVersion")
                        {
                            *rv = Value::String("<bookmark-rv>".into());
                        }
                        e
                    })
                    .collect()
            }),
            sentinel,
        }
    }

    /// First pass: number uids, resourceVersions and generated names in a server-independent
    /// order.
    fn collect(&mut self, v: &Value, list_meta: bool) {
        match v {
            Value::Object(m) => {
                if let (Some(Value::String(g)), Some(Value::String(n))) =
                    (m.get("generateName"), m.get("name"))
                    && n.len() > g.len()
                    && n.starts_with(g.as_str())
                    && !self.generated.iter().any(|(raw, _)| raw == n)
                {
                    let sym = format!("{g}<gen{}>", self.generated.len() + 1);
                    self.generated.push((n.clone(), sym));
                }
                let is_list = m.contains_key("items");
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                for k in keys {
                    let x = &m[k];
                    match (k.as_str(), x) {
                        ("uid", Value::String(s)) => self.uid(s),
                        ("resourceVersion", Value::String(s)) if !list_meta => {
                            if !s.is_empty() && !self.rvs.contains_key(s) {
                                let sym = self.symbol("rv");
                                self.rvs.insert(s.clone(), sym);
                            }
                        }
                        ("metadata", _) => self.collect(x, is_list),
                        (_, Value::String(s)) => {
                            for u in UUID.find_iter(s) {
                                self.uid(u.as_str());
                            }
                        }
                        _ => self.collect(x, false),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| self.collect(x, false)),
            Value::String(s) => {
                for u in UUID.find_iter(s) {
                    self.uid(u.as_str());
                }
            }
            _ => {}
        }
    }

    fn uid(&mut self, s: &str) {
        if !self.uids.contains_key(s) {
            let sym = self.symbol("uid");
            self.uids.insert(s.to_string(), sym);
        }
    }

    /// A new symbol, named by the step that first showed the value (and its order there): a
    /// server that mints one version more than the other differs at that step only, not at every
    /// later one, as it would with symbols numbered across the sequence.
    fn symbol(&mut self, what: &str) -> String {
        self.fresh += 1;
        if self.fresh == 1 {
            format!("<{what}@{}>", self.step)
        } else {
            format!("<{what}@{}.{}>", self.step, self.fresh)
        }
    }

    /// Second pass: replace what the first pass numbered.
    fn transform(&self, v: &Value, key: Option<&str>, list_meta: bool) -> Value {
        match v {
            Value::Object(m) => {
                let is_list = m.contains_key("items");
                let mut out = Map::new();
                for (k, x) in m {
                    let y = match (k.as_str(), x) {
                        ("resourceVersion", Value::String(s)) if list_meta => {
                            Value::String(if s.is_empty() {
                                String::new()
                            } else {
                                "<list-rv>".into()
                            })
                        }
                        ("resourceVersion", Value::String(s)) => {
                            Value::String(self.rvs.get(s).cloned().unwrap_or_else(|| s.clone()))
                        }
                        ("continue", Value::String(s)) if !s.is_empty() => {
                            Value::String("<continue>".into())
                        }
                        ("metadata", _) => self.transform(x, Some(k), is_list),
                        _ => self.transform(x, Some(k), false),
                    };
                    out.insert(k.clone(), y);
                }
                Value::Object(out)
            }
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| self.transform(x, key, false)).collect())
            }
            Value::String(s) => {
                if key == Some("uid") {
                    return Value::String(self.uids.get(s).cloned().unwrap_or_else(|| s.clone()));
                }
                if TIME.is_match(s) {
                    return Value::String("<time>".into());
                }
                Value::String(self.text(s, key == Some("message")))
            }
            other => other.clone(),
        }
    }

    /// A free text (name, message, warning) with the namespace, generated names, uids and, in
    /// messages, quoted resourceVersions replaced.
    fn text(&self, s: &str, message: bool) -> String {
        let mut out = s.to_string();
        if self.namespace_actual != self.namespace && out.contains(&self.namespace_actual) {
            out = out.replace(&self.namespace_actual, &self.namespace);
        }
        for (raw, sym) in &self.generated {
            if out.contains(raw.as_str()) {
                out = out.replace(raw.as_str(), sym);
            }
        }
        if TOKEN_VOLUME.is_match(&out) {
            out = TOKEN_VOLUME
                .replace_all(&out, "kube-api-access-<gen>")
                .into_owned();
        }
        if UUID.is_match(&out) {
            out = UUID
                .replace_all(&out, |c: &regex::Captures| {
                    self.uids
                        .get(&c[0])
                        .cloned()
                        .unwrap_or_else(|| c[0].to_string())
                })
                .into_owned();
        }
        if message && TEXT_TIME.is_match(&out) {
            out = TEXT_TIME.replace_all(&out, "<time>").into_owned();
        }
        if message {
            out = sort_aggregate(&out);
            out = sort_listed_lines(&out);
        }
        if message && MESSAGE_RV.is_match(&out) {
            out = MESSAGE_RV
                .replace_all(&out, |c: &regex::Captures| {
                    let rv = self
                        .rvs
                        .get(&c[2])
                        .cloned()
                        .unwrap_or_else(|| "<rv?>".into());
                    format!("{}{rv}", &c[1])
                })
                .into_owned();
        }
        out
    }
}

/// Upstream lists the errors of an aggregate in Go map order (labels), which varies from run to
/// run: `X is invalid: [e1, e2]` is compared with its errors sorted.
fn sort_aggregate(message: &str) -> String {
    let Some(open) = message.find("is invalid: [") else {
        return message.to_string();
    };
    let start = open + "is invalid: [".len();
    if !message.ends_with(']') || start >= message.len() {
        return message.to_string();
    }
    let inner = &message[start..message.len() - 1];
    let mut parts = Vec::new();
    let mut from = 0;
    for (at, _) in inner.match_indices(", ") {
        if at >= from && ERROR_START.is_match(&inner[at + 2..]) {
            parts.push(&inner[from..at]);
            from = at + 2;
        }
    }
    parts.push(&inner[from..]);
    parts.sort_unstable();
    format!("{}{}]", &message[..start], parts.join(", "))
}

/// An apply conflict lists its managers and their fields one per line (`conflicts with "m":` then
/// `- .spec.x` lines) in no defined order upstream; groups and lines are compared sorted.
fn sort_listed_lines(message: &str) -> String {
    let mut lines = message.split('\n');
    let Some(first) = lines.next() else {
        return message.to_string();
    };
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() || !rest[0].starts_with("- ") {
        return message.to_string();
    }
    // The first group's header ends the first line: `Apply failed with 2 conflicts: conflicts
    // with "m" using v1:`; the others have lines of their own.
    let (prefix, first_header) = match first.find(": conflict") {
        Some(at) => (&first[..at + 2], &first[at + 2..]),
        None => ("", first),
    };
    let mut groups: Vec<(String, Vec<&str>)> = vec![(first_header.to_string(), Vec::new())];
    for line in rest {
        match groups.last_mut() {
            Some(g) if line.starts_with("- ") => g.1.push(line),
            _ => groups.push((line.to_string(), Vec::new())),
        }
    }
    for g in &mut groups {
        g.1.sort_unstable();
    }
    if !prefix.is_empty() {
        groups.sort();
    }
    let text: Vec<String> = groups
        .iter()
        .map(|(h, ls)| {
            std::iter::once(h.as_str())
                .chain(ls.iter().copied())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    format!("{prefix}{}", text.join("\n"))
}

/// Upstream orders managedFields entries by time at one-second resolution, so entries written in
/// the same second come in either order; they are compared sorted by manager, operation and
/// subresource.
fn sort_managed_fields(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
                let key = |e: &Value| {
                    ["manager", "operation", "subresource", "apiVersion"]
                        .map(|k| e.get(k).and_then(Value::as_str).unwrap_or("").to_string())
                };
                entries.sort_by_key(key);
            }
            m.values_mut().for_each(sort_managed_fields);
        }
        Value::Array(a) => a.iter_mut().for_each(sort_managed_fields),
        _ => {}
    }
}

fn name_of(v: &Value) -> &str {
    v.pointer("/object/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A list holding generated names is sorted by the normalized names: the servers sort by the raw
/// (random) names, so their orders differ by chance.
fn sort_generated_items(body: &mut Value) {
    if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut)
        && items.iter().any(|i| {
            i.pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.contains("<gen"))
        })
    {
        items.sort_by(|a, b| {
            let n = |v: &Value| {
                v.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            n(a).cmp(&n(b))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn servers_own_values_become_symbols_in_order_of_appearance() {
        let mut n = Normalizer::new("dt-1-x", "dt-1");
        let a = Answer {
            status: 201,
            body: json!({"metadata": {"name": "cm-", "namespace": "dt-1-x", "uid": "0f0e0d0c-0000-4000-8000-000000000001",
                "resourceVersion": "812", "creationTimestamp": "2026-01-02T03:04:05Z"}}),
            ..Default::default()
        };
        let b = Answer {
            status: 409,
            body: json!({"kind": "Status", "message": "Precondition failed: ResourceVersion in precondition: 812, ResourceVersion in object meta: 900, UID 0f0e0d0c-0000-4000-8000-000000000001"}),
            ..Default::default()
        };
        let na = n.answer(0, &a, false);
        assert_eq!(na.body["metadata"]["resourceVersion"], "<rv@0>");
        assert_eq!(na.body["metadata"]["uid"], "<uid@0.2>");
        assert_eq!(na.body["metadata"]["creationTimestamp"], "<time>");
        assert_eq!(na.body["metadata"]["namespace"], "dt-1");
        let nb = n.answer(1, &b, false);
        assert_eq!(
            nb.body["message"],
            "Precondition failed: ResourceVersion in precondition: <rv@0>, ResourceVersion in object meta: <rv?>, UID <uid@0.2>"
        );
    }

    #[test]
    fn aggregate_errors_are_sorted() {
        let m = "Pod \"a\" is invalid: [metadata.labels: Invalid value: \"b!\": x, y, metadata.labels: Invalid value: \"a!\": z]";
        assert_eq!(
            sort_aggregate(m),
            "Pod \"a\" is invalid: [metadata.labels: Invalid value: \"a!\": z, metadata.labels: Invalid value: \"b!\": x, y]"
        );
        assert_eq!(sort_aggregate("plain"), "plain");
        assert_eq!(
            sort_listed_lines("Apply failed with 2 conflicts: with \"m\":\n- .spec.r\n- .spec.c"),
            "Apply failed with 2 conflicts: with \"m\":\n- .spec.c\n- .spec.r"
        );
        assert_eq!(
            sort_listed_lines(
                "Apply failed with 2 conflicts: conflicts with \"b\":\n- .x\nconflicts with \"a\":\n- .z\n- .y"
            ),
            "Apply failed with 2 conflicts: conflicts with \"a\":\n- .y\n- .z\nconflicts with \"b\":\n- .x"
        );
    }

    #[test]
    fn generated_names_and_list_versions() {
        let mut n = Normalizer::new("dt-2", "dt-2");
        let created = Answer {
            status: 201,
            body: json!({"metadata": {"name": "cm-x7k2p", "generateName": "cm-", "resourceVersion": "5"}}),
            ..Default::default()
        };
        assert_eq!(
            n.answer(0, &created, false).body["metadata"]["name"],
            "cm-<gen1>"
        );
        let list = Answer {
            status: 200,
            body: json!({"metadata": {"resourceVersion": "77", "continue": "abc"}, "items": [
                {"metadata": {"name": "zz", "resourceVersion": "6"}},
                {"metadata": {"name": "cm-x7k2p", "resourceVersion": "5"}}]}),
            ..Default::default()
        };
        let l = n.answer(1, &list, false).body;
        assert_eq!(l["metadata"]["resourceVersion"], "<list-rv>");
        assert_eq!(l["metadata"]["continue"], "<continue>");
        assert_eq!(l["items"][0]["metadata"]["name"], "cm-<gen1>");
        assert_eq!(l["items"][0]["metadata"]["resourceVersion"], "<rv@0>");
        assert_eq!(l["items"][1]["metadata"]["resourceVersion"], "<rv@1>");
    }
}
