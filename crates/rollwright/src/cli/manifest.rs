//! Reading manifests for `apply -f` and `delete -f`: files, directories (their `.yaml`, `.yml`
//! and `.json` files, in name order) and `-` for standard input; several YAML documents per
//! file; `kind: List` unpacked.

use anyhow::{Context, bail};
use serde_json::Value;
use std::{io::Read, path::Path};

/// One object and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// The file (or `-`) it was read from.
    pub source: String,
    /// The object.
    pub object: Value,
}

impl Manifest {
    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.object["apiVersion"].as_str().unwrap_or_default()
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `metadata.namespace`, if set.
    pub fn namespace(&self) -> Option<&str> {
        self.object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }
}

/// The objects in `text`, read from `source`.
pub fn parse(source: &str, text: &str) -> anyhow::Result<Vec<Manifest>> {
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(text).map_err(|e| {
        let first = e.to_string();
        let first = first.lines().next().unwrap_or_default().to_string();
        anyhow::anyhow!("{source}: not valid YAML or JSON: {first}")
    })?;
    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let items = match doc["kind"].as_str() {
            Some(k) if k.ends_with("List") && doc["items"].is_array() => {
                doc["items"].as_array().cloned().unwrap_or_default()
            }
            _ => vec![doc],
        };
        for object in items {
            let m = Manifest {
                source: source.to_string(),
                object,
            };
            let missing: Vec<&str> = [
                ("apiVersion", m.api_version()),
                ("kind", m.kind()),
                ("metadata.name", m.name()),
            ]
            .into_iter()
            .filter(|(_, v)| v.is_empty())
            .map(|(k, _)| k)
            .collect();
            if !missing.is_empty() {
                bail!(
                    "{source}: document {} has no {} (every object needs apiVersion, kind and metadata.name)",
                    i + 1,
                    missing.join(", ")
                );
            }
            out.push(m);
        }
    }
    Ok(out)
}

/// Reads every source.
pub fn read(sources: &[String]) -> anyhow::Result<Vec<Manifest>> {
    let mut out = Vec::new();
    for source in sources {
        if source == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading standard input")?;
            out.extend(parse("-", &text)?);
            continue;
        }
        let path = Path::new(source);
        let files = if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)
                .with_context(|| format!("reading directory {source}"))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| ["yaml", "yml", "json"].contains(&e))
                })
                .collect();
            files.sort();
            files
        } else {
            vec![path.to_path_buf()]
        };
        for file in files {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {} (is the path right?)", file.display()))?;
            out.extend(parse(&file.display().to_string(), &text)?);
        }
    }
    if out.is_empty() {
        bail!(
            "no objects in {} (give files with -f FILE, a directory, or - for stdin)",
            sources.join(", ")
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_lists_and_missing_fields() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n";
        let got = parse("x.yaml", text).expect("parse");
        let names: Vec<&str> = got.iter().map(Manifest::name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(got[1].kind(), "Pod");
        let err = parse("y.yaml", "apiVersion: v1\nkind: Pod\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "y.yaml: document 1 has no metadata.name (every object needs apiVersion, kind and metadata.name)"
        );
        let err = parse("z.yaml", "a: [b\n").unwrap_err().to_string();
        assert!(err.starts_with("z.yaml: not valid YAML or JSON: "), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn directories_in_name_order() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("b.yaml"),
            "{apiVersion: v1, kind: Pod, metadata: {name: b}}",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}"#,
        )
        .expect("write");
        std::fs::write(dir.path().join("notes.txt"), "not a manifest").expect("write");
        let got = read(&[dir.path().display().to_string()]).expect("read");
        let names: Vec<&str> = got.iter().map(Manifest::name).collect();
        assert_eq!(names, ["a", "b"]);
        let err = read(&["/nonexistent/x.yaml".to_string()])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("cannot read /nonexistent/x.yaml"), "{err}");
    }
}
