//! Cell formatting shared by the printers: field access over JSON, ages, label and selector
//! strings, container lists, as upstream's printers format them.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Field access.

pub(crate) fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

pub(crate) fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn i(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

pub(crate) fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(crate) fn timestamp(v: Option<&Value>) -> Option<Timestamp> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
}

/// Upstream's `translateTimestampSince`: the age of a timestamp, `<unknown>` when unset.
pub(crate) fn since(v: Option<&Value>, now: Timestamp) -> String {
    match timestamp(v) {
        Some(t) => human_duration_since(t, now),
        None => "<unknown>".into(),
    }
}

pub(crate) fn human_duration_since(t: Timestamp, now: Timestamp) -> String {
    let nanos = now.as_nanosecond() - t.as_nanosecond();
    human_duration(i64::try_from(nanos).unwrap_or(i64::MAX))
}

/// Upstream's `duration.HumanDuration` over a duration in nanoseconds: about two significant
/// figures ("5s", "3m2s", "10m", "2d3h", "3y45d"), with a two-second allowance for clock skew.
pub fn human_duration(nanos: i64) -> String {
    const SEC: i64 = 1_000_000_000;
    let seconds = nanos / SEC; // truncates toward zero, like Go's int(d.Seconds())
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / (60 * SEC);
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / (3600 * SEC);
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// Upstream's `layoutContainerCells`: names and images, comma-joined.
pub(crate) fn container_cells(pod_spec: &Value) -> (String, String) {
    let cs = arr(pod_spec, &["containers"]);
    let names: Vec<&str> = cs.iter().map(|c| s(c, &["name"])).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// `labels.FormatLabels`: `k=v` pairs sorted by key, `<none>` when empty.
pub(crate) fn format_labels(map: Option<&Value>) -> String {
    let pairs: BTreeMap<&str, &str> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A LabelSelector as upstream's `labels.Selector.String()`: requirements sorted by key, `k=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; `None` when the selector is invalid.
pub(crate) fn selector_string(sel: &Value) -> Option<String> {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str()?)));
        }
    }
    for e in arr(sel, &["matchExpressions"]) {
        let key = s(e, &["key"]);
        let mut values: Vec<&str> = arr(e, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match s(e, &["operator"]) {
            "In" | "NotIn" if values.is_empty() => return None,
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" | "DoesNotExist" if !values.is_empty() => return None,
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: like [`selector_string`] but `<none>` when empty and `<error>`
/// when invalid.
pub(crate) fn format_label_selector(sel: Option<&Value>) -> String {
    match sel.filter(|v| !v.is_null()) {
        None => "<none>".into(),
        Some(sel) => match selector_string(sel) {
            None => "<error>".into(),
            Some(s) if s.is_empty() => "<none>".into(),
            Some(s) => s,
        },
    }
}

/// `daemonset.apps/name` from the controller owner reference, `<none>` without one.
pub(crate) fn controller_name(obj: &Value) -> String {
    let Some(owner) = arr(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|o| o["controller"] == json!(true))
    else {
        return "<none>".into();
    };
    let api_version = s(owner, &["apiVersion"]);
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = s(owner, &["kind"]);
    let name = s(owner, &["name"]);
    if kind.is_empty() && group.is_empty() {
        return name.to_string();
    }
    let gk = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    format!("{}/{name}", gk.to_lowercase())
}

/// `GetAccessModesAsString`: the short forms in upstream's fixed order, duplicates dropped.
pub(crate) fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v == m);
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(long, _)| has(long))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}
