//! kubectl's output conventions: aligned columns, human ages, YAML and JSON of objects.

use anyhow::Context;
use jiff::Timestamp;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the verbs keep their confirmations to themselves (see [`quiet`]).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Keeps the verbs' one-line confirmations (`deployment.apps/web image updated`) off standard
/// output for the rest of the process: `whatif` runs a verb once per run and prints its own
/// report there.
pub fn quiet() {
    QUIET.store(true, Ordering::Relaxed);
}

/// Prints a verb's confirmation, as kubectl does, unless [`quiet`].
pub fn confirm(line: impl std::fmt::Display) {
    if !QUIET.load(Ordering::Relaxed) {
        println!("{line}");
    }
}

/// `-o` formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// More columns.
    Wide,
    /// The objects as YAML.
    Yaml,
    /// The objects as JSON.
    Json,
    /// `kind.group/name` per object.
    Name,
}

/// Rows (the first is the header) as columns padded to their widest cell, three spaces apart,
/// as kubectl prints them.
pub fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < row.len() {
                let pad = widths[c] - cell.chars().count() + 3;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// kubectl's `HumanDuration`: `45s`, `3m20s`, `15m`, `5h10m`, `3d`, ...
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h) = (s / 60, s / 3600);
    let d = h / 24;
    let y = d / 365;
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else if h < 24 * 365 * 8 {
        if d % 365 == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{}d", d % 365)
        }
    } else {
        format!("{y}y")
    }
}

/// The age of something created at `since`, or `<unknown>`.
pub fn age(since: Option<Timestamp>, now: Timestamp) -> String {
    since.map_or("<unknown>".into(), |t| {
        human_duration(t.duration_until(now).as_secs())
    })
}

/// A value as YAML (keys in the order the server sent them).
pub fn yaml(v: &Value) -> anyhow::Result<String> {
    serde_saphyr::to_string(v).context("printing YAML")
}

/// A value as indented JSON.
pub fn json(v: &Value) -> anyhow::Result<String> {
    serde_json::to_string_pretty(v).context("printing JSON")
}

/// A copy of `v` with every map's keys sorted, so two objects print in the same order.
pub fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_align_three_spaces_apart() {
        let rows = vec![
            vec!["NAME".to_string(), "READY".into(), "AGE".into()],
            vec!["web-1".to_string(), "1/1".into(), "5s".into()],
            vec!["a".to_string(), "10/10".into(), "3d".into()],
        ];
        assert_eq!(
            table(&rows),
            "NAME    READY   AGE\nweb-1   1/1     5s\na       10/10   3d\n"
        );
    }

    #[test]
    fn ages_as_kubectl_prints_them() {
        for (s, want) in [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (900, "15m"),
            (3 * 3600 + 600, "3h10m"),
            (10 * 3600, "10h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }

    #[test]
    fn sorted_keys_recursively() {
        let v = json!({"b": 1, "a": {"d": [{"z": 1, "y": 2}], "c": 2}});
        assert_eq!(
            serde_json::to_string(&sorted(&v)).unwrap_or_default(),
            r#"{"a":{"c":2,"d":[{"y":2,"z":1}]},"b":1}"#
        );
    }
}
