//! `rollwright get TYPE [NAME...]` with kubectl's output: the columns are the server's own
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, as kubectl asks), so every kind
//! prints as `kubectl get` prints it; `-o wide|yaml|json|name` as kubectl.

use super::{
    discovery::{Catalog, Resource},
    failure::Explain,
    kubeconfig::{Session, Target},
    output::{self, Format},
};
use anyhow::{Context, bail};
use futures::TryStreamExt;
use kube::{
    api::{GetParams, ListParams, WatchEvent, WatchParams},
    core::Request as ApiRequest,
};
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// `get` flags.
#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// TYPE [NAME...], TYPE/NAME..., or TYPE,TYPE (e.g. pods, deploy web, ds/agent, deploy,rs).
    #[arg(required = true, value_name = "TYPE [NAME...]")]
    pub args: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Format>,
    /// Label selector, e.g. app=web.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// After the list, print a row for every change (one type, table output).
    #[arg(short = 'w', long)]
    pub watch: bool,
    #[command(flatten)]
    pub target: Target,
}

/// What to fetch: a resource type and the names asked for (none: all).
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// The type as written.
    pub type_name: String,
    /// Names, empty for a list.
    pub names: Vec<String>,
}

/// Reads `TYPE NAME...`, `TYPE/NAME...` and `TYPE,TYPE`.
pub fn requests(args: &[String]) -> anyhow::Result<Vec<Request>> {
    if args.iter().any(|a| a.contains('/')) {
        let mut out: Vec<Request> = Vec::new();
        for a in args {
            let Some((t, n)) = a.split_once('/') else {
                bail!("mix no TYPE/NAME with plain names: write {a:?} as TYPE/{a}");
            };
            match out.iter_mut().find(|r| r.type_name == t) {
                Some(r) => r.names.push(n.to_string()),
                None => out.push(Request {
                    type_name: t.to_string(),
                    names: vec![n.to_string()],
                }),
            }
        }
        return Ok(out);
    }
    let (types, names) = args.split_first().context("name a type, e.g. pods")?;
    let types: Vec<&str> = types.split(',').filter(|t| !t.is_empty()).collect();
    if types.len() > 1 && !names.is_empty() {
        bail!("name objects of several types as TYPE/NAME, e.g. deploy/web rs/web-1");
    }
    Ok(types
        .into_iter()
        .map(|t| Request {
            type_name: t.to_string(),
            names: names.to_vec(),
        })
        .collect())
}

/// The URL path of a resource's collection.
pub fn collection_path(r: &Resource, namespace: Option<&str>) -> String {
    let base = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    match namespace {
        Some(ns) if r.namespaced => format!("{base}/namespaces/{ns}/{}", r.plural),
        _ => format!("{base}/{}", r.plural),
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<none>".into(),
        other => other.to_string(),
    }
}

/// A server Table as kubectl prints it: the priority-0 columns (all with `wide`), a NAMESPACE
/// column first when listing all namespaces.
pub fn render_table(tables: &[Value], wide: bool, all_namespaces: bool) -> String {
    let Some(first) = tables.first() else {
        return String::new();
    };
    let columns: Vec<(usize, String)> = first["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| wide || c["priority"].as_i64().unwrap_or(0) == 0)
        .map(|(i, c)| (i, c["name"].as_str().unwrap_or("").to_uppercase()))
        .collect();
    let mut header: Vec<String> = columns.iter().map(|(_, n)| n.clone()).collect();
    if all_namespaces {
        header.insert(0, "NAMESPACE".into());
    }
    let mut rows = vec![header];
    for table in tables {
        for row in table["rows"].as_array().into_iter().flatten() {
            let cells = row["cells"].as_array();
            let mut out: Vec<String> = columns
                .iter()
                .map(|(i, _)| cells.and_then(|c| c.get(*i)).map_or(String::new(), cell))
                .collect();
            if all_namespaces {
                let ns = row
                    .pointer("/object/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                out.insert(0, ns.to_string());
            }
            rows.push(out);
        }
    }
    if rows.len() == 1 {
        return String::new();
    }
    output::table(&rows)
}

async fn fetch(
    session: &Session,
    req: http::Request<Vec<u8>>,
    ns: Option<&str>,
) -> anyhow::Result<Value> {
    let text = session
        .client
        .request_text(req)
        .await
        .explain(session, ns)?;
    serde_json::from_str(&text).context("reading the server's answer")
}

fn with_accept(
    mut req: http::Request<Vec<u8>>,
    accept: &str,
) -> anyhow::Result<http::Request<Vec<u8>>> {
    req.headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_str(accept)?);
    Ok(req)
}

/// Column widths of a rendered table, so that watched rows line up under the first list.
fn widths(rendered: &str) -> Vec<usize> {
    let Some(header) = rendered.lines().next() else {
        return Vec::new();
    };
    // A column starts where a header word starts after at least three spaces.
    let mut starts = vec![0];
    let bytes: Vec<char> = header.chars().collect();
    for i in 3..bytes.len() {
        if bytes[i] != ' ' && bytes[i - 1] == ' ' && bytes[i - 2] == ' ' && bytes[i - 3] == ' ' {
            starts.push(i);
        }
    }
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

/// `get -w`: a row per change after the list, as kubectl prints them.
async fn watch_rows(
    session: &Session,
    builder: &ApiRequest,
    args: &GetArgs,
    resource_version: &str,
    (tables, wide, all): (&[Value], bool, bool),
    ns: Option<&str>,
) -> anyhow::Result<()> {
    let rendered = render_table(tables, wide, all);
    let header_only = {
        let mut t = tables.first().cloned().unwrap_or_default();
        t["rows"] = json!([]);
        t
    };
    let mut columns = widths(&rendered);
    let mut wp = WatchParams::default();
    if let Some(sel) = &args.selector {
        wp = wp.labels(sel);
    }
    let req = with_accept(builder.watch(&wp, resource_version)?, TABLE)?;
    let stream = session
        .client
        .request_events::<Value>(req)
        .await
        .explain(session, ns)?;
    futures::pin_mut!(stream);
    if rendered.is_empty() {
        // Nothing listed: the header comes with the first row.
        columns.clear();
    }
    while let Some(event) = stream.try_next().await.explain(session, ns)? {
        let table = match event {
            WatchEvent::Added(t) | WatchEvent::Modified(t) | WatchEvent::Deleted(t) => t,
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => bail!("the watch ended: {}", e.message),
        };
        let mut with_header = header_only.clone();
        with_header["rows"] = table["rows"].clone();
        if table.get("columnDefinitions").is_some_and(Value::is_array) {
            with_header["columnDefinitions"] = table["columnDefinitions"].clone();
        }
        let text = render_table(&[with_header], wide, all);
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        if columns.is_empty() {
            println!("{header}");
            columns = widths(&text);
        }
        for line in lines {
            println!("{}", realign(line, header, &columns));
        }
    }
    Ok(())
}

/// A row laid out by its own header, laid out again at `columns`.
fn realign(line: &str, header: &str, columns: &[usize]) -> String {
    let own = widths(&format!("{header}\n"));
    let chars: Vec<char> = line.chars().collect();
    let mut cells = Vec::new();
    let mut at = 0;
    for w in &own {
        let end = (at + w).min(chars.len());
        cells.push(
            chars[at.min(end)..end]
                .iter()
                .collect::<String>()
                .trim_end()
                .to_string(),
        );
        at = end;
    }
    cells.push(chars[at.min(chars.len())..].iter().collect::<String>());
    let mut out = String::new();
    for (i, cell) in cells.iter().enumerate() {
        out.push_str(cell);
        if let Some(w) = columns.get(i) {
            let pad = w.saturating_sub(cell.chars().count()).max(3);
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    out.trim_end().to_string()
}

/// Runs `get`.
pub async fn run(args: GetArgs) -> anyhow::Result<()> {
    let requests = requests(&args.args)?;
    if args.watch && (requests.len() != 1 || !requests[0].names.is_empty()) {
        bail!("get -w watches one type: e.g. `rollwright get pods -w` (narrow it with -l)");
    }
    if args.watch
        && matches!(
            args.output,
            Some(Format::Yaml | Format::Json | Format::Name)
        )
    {
        bail!("get -w prints tables: leave out -o yaml|json|name");
    }
    let session = args.target.connect().await?;
    let catalog = Catalog::discover(&session).await?;
    let all = session.all_namespaces;
    let mut printed_tables = 0;
    let mut objects: Vec<Value> = Vec::new();
    for request in &requests {
        let resource = catalog.resolve(&request.type_name)?;
        let ns = (!all && resource.namespaced).then_some(session.namespace.as_str());
        let path = collection_path(resource, ns);
        let builder = ApiRequest::new(path);
        let reqs: Vec<http::Request<Vec<u8>>> = if request.names.is_empty() {
            let mut lp = ListParams::default();
            if let Some(sel) = &args.selector {
                lp = lp.labels(sel);
            }
            vec![builder.list(&lp)?]
        } else {
            request
                .names
                .iter()
                .map(|n| builder.get(n, &GetParams::default()))
                .collect::<Result<_, _>>()?
        };
        match args.output {
            None | Some(Format::Wide) => {
                let mut tables = Vec::new();
                for req in reqs {
                    tables.push(fetch(&session, with_accept(req, TABLE)?, ns).await?);
                }
                let wide = args.output == Some(Format::Wide);
                let text = render_table(&tables, wide, all);
                if !text.is_empty() {
                    if printed_tables > 0 {
                        println!();
                    }
                    print!("{text}");
                    printed_tables += 1;
                }
                if args.watch {
                    let rv = tables
                        .first()
                        .and_then(|t| t.pointer("/metadata/resourceVersion"))
                        .and_then(Value::as_str)
                        .unwrap_or("0")
                        .to_string();
                    return watch_rows(&session, &builder, &args, &rv, (&tables, wide, all), ns)
                        .await;
                }
            }
            Some(Format::Yaml | Format::Json | Format::Name) => {
                for req in reqs {
                    let v = fetch(&session, with_accept(req, "application/json")?, ns).await?;
                    match v["items"].as_array() {
                        Some(items)
                            if v.get("kind")
                                .and_then(Value::as_str)
                                .is_some_and(|k| k.ends_with("List")) =>
                        {
                            for item in items {
                                let mut item = item.clone();
                                item["apiVersion"] = json!(resource.api_resource().api_version);
                                item["kind"] = json!(resource.kind);
                                objects.push(item);
                            }
                        }
                        _ => objects.push(v),
                    }
                }
                if args.output == Some(Format::Name) {
                    for o in objects.drain(..) {
                        println!(
                            "{}/{}",
                            resource.type_name(),
                            o.pointer("/metadata/name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                        );
                    }
                }
            }
        }
    }
    match args.output {
        Some(Format::Yaml | Format::Json) => {
            let single = requests.len() == 1 && requests[0].names.len() == 1 && objects.len() == 1;
            let value = if single {
                objects.pop().unwrap_or_default()
            } else {
                json!({"apiVersion": "v1", "kind": "List", "items": objects, "metadata": {"resourceVersion": ""}})
            };
            match args.output {
                Some(Format::Yaml) => print!("{}", output::yaml(&value)?),
                _ => println!("{}", output::json(&value)?),
            }
        }
        None | Some(Format::Wide) if printed_tables == 0 => {
            if all {
                eprintln!("No resources found");
            } else {
                eprintln!("No resources found in {} namespace.", session.namespace);
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_forms_kubectl_takes() {
        assert_eq!(
            requests(&strings(&["pods"])).expect("ok"),
            vec![Request {
                type_name: "pods".into(),
                names: vec![]
            }]
        );
        assert_eq!(
            requests(&strings(&["deploy", "a", "b"])).expect("ok"),
            vec![Request {
                type_name: "deploy".into(),
                names: strings(&["a", "b"])
            }]
        );
        assert_eq!(
            requests(&strings(&["deploy,rs"])).expect("ok"),
            vec![
                Request {
                    type_name: "deploy".into(),
                    names: vec![]
                },
                Request {
                    type_name: "rs".into(),
                    names: vec![]
                }
            ]
        );
        assert_eq!(
            requests(&strings(&["ds/a", "deploy/b", "ds/c"])).expect("ok"),
            vec![
                Request {
                    type_name: "ds".into(),
                    names: strings(&["a", "c"])
                },
                Request {
                    type_name: "deploy".into(),
                    names: strings(&["b"])
                }
            ]
        );
        assert!(requests(&strings(&["ds/a", "b"])).is_err());
        assert!(requests(&strings(&["deploy,rs", "x"])).is_err());
    }

    #[test]
    fn tables_print_as_kubectl_prints_them() {
        let table = json!({"kind": "Table", "columnDefinitions": [
        {"name": "Name", "priority": 0}, {"name": "Ready", "priority": 0},
        {"name": "Node", "priority": 1}, {"name": "Age", "priority": 0}],
        "rows": [
            {"cells": ["web-1", "1/1", "node-0", "5s"], "object": {"metadata": {"namespace": "a"}}},
            {"cells": ["web-22", "0/1", null, "10m"], "object": {"metadata": {"namespace": "b"}}}
        ]});
        assert_eq!(
            render_table(std::slice::from_ref(&table), false, false),
            "NAME     READY   AGE\nweb-1    1/1     5s\nweb-22   0/1     10m\n"
        );
        assert_eq!(
            render_table(std::slice::from_ref(&table), true, true),
            "NAMESPACE   NAME     READY   NODE     AGE\na           web-1    1/1     node-0   5s\nb           web-22   0/1     <none>   10m\n"
        );
        let empty = json!({"columnDefinitions": [{"name": "Name"}], "rows": []});
        assert_eq!(render_table(&[empty], false, false), "");
    }

    #[test]
    fn watched_rows_line_up_under_the_list() {
        let header = "NAME    READY   AGE";
        assert_eq!(widths(header), vec![8, 8]);
        assert_eq!(
            realign("web-12345   0/1     1s", "NAME        READY   AGE", &[8, 8]),
            "web-12345   0/1     1s"
        );
        assert_eq!(
            realign("a      1/1     2s", "NAME   READY   AGE", &[8, 8]),
            "a       1/1     2s"
        );
    }

    #[test]
    fn collection_paths() {
        let r = Resource {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            singular: "deployment".into(),
            short_names: vec![],
            namespaced: true,
            verbs: vec![],
        };
        assert_eq!(
            collection_path(&r, Some("x")),
            "/apis/apps/v1/namespaces/x/deployments"
        );
        assert_eq!(collection_path(&r, None), "/apis/apps/v1/deployments");
        let nodes = Resource {
            group: String::new(),
            plural: "nodes".into(),
            namespaced: false,
            ..r
        };
        assert_eq!(collection_path(&nodes, Some("x")), "/api/v1/nodes");
    }
}
