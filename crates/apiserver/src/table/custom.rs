//! The columns of custom resources: a CustomResourceDefinition version's
//! `additionalPrinterColumns`, each a JSONPath into the object (upstream's `tableconvertor`).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::since;

/// One `additionalPrinterColumns` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomColumn {
    /// The header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub ty: String,
    /// The OpenAPI format, if any.
    pub format: String,
    /// The description.
    pub description: String,
    /// 0 shows in `kubectl get`, higher only with `-o wide`.
    pub priority: i64,
    /// A simple JSONPath: `.spec.replicas`, `.status.conditions[0].status`,
    /// `.status.conditions[?(@.type=="Ready")].status`.
    pub json_path: String,
}

impl CustomColumn {
    /// Reads an entry of `additionalPrinterColumns`.
    pub fn from_crd(v: &Value) -> Self {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Self {
            name: s("name"),
            ty: s("type"),
            format: s("format"),
            description: s("description"),
            priority: v.get("priority").and_then(Value::as_i64).unwrap_or(0),
            json_path: s("jsonPath"),
        }
    }

    pub(super) fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.ty,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }

    /// The cell: the value at the path (dates as ages, as upstream's table convertor prints
    /// them), null when the path finds nothing.
    pub(super) fn cell(&self, obj: &Value, now: Timestamp) -> Value {
        match eval(obj, &self.json_path) {
            None => Value::Null,
            Some(v) if self.ty == "date" => json!(since(Some(&v), now)),
            Some(Value::Array(items)) => {
                let parts: Vec<String> = items
                    .iter()
                    .map(|i| match i {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                json!(parts.join(","))
            }
            Some(v) => v,
        }
    }
}

/// Evaluates the JSONPath subset CRDs use.
fn eval(obj: &Value, path: &str) -> Option<Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut cur = obj.clone();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            cur = cur.get(key)?.clone();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            let items = cur.as_array()?;
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(['"', '\'']);
                cur = items
                    .iter()
                    .find(|i| {
                        i.get(field.trim())
                            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                            .as_deref()
                            == Some(want)
                    })?
                    .clone();
            } else if inner == "*" {
                cur = Value::Array(items.clone());
            } else {
                let idx: usize = inner.parse().ok()?;
                cur = items.get(idx)?.clone();
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn json_paths() {
        let obj = json!({"spec": {"replicas": 3, "tags": ["a", "b"]},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(eval(&obj, ".spec.replicas"), Some(json!(3)));
        assert_eq!(
            eval(&obj, ".status.conditions[1].type"),
            Some(json!("Ready"))
        );
        assert_eq!(
            eval(&obj, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(eval(&obj, ".spec.missing"), None);
        let col = CustomColumn {
            name: "Tags".into(),
            ty: "string".into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: ".spec.tags".into(),
        };
        assert_eq!(col.cell(&obj, clock::now()), json!("a,b"));
    }
}
