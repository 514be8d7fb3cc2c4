//! Remote APIServices' groups in discovery, as upstream's aggregator lists them: in `/apis` and
//! `/apis/GROUP` whether available or not (`apisHandler`, `apiGroupHandler`), and in aggregated
//! discovery with the resources its server listed at the last successful check, or as a
//! version with no resources and `freshness: Stale` when there is none (the discovery manager),
//! which clients skip while they list every other group.
//!
//! A group served here as well as by a remote APIService is listed as served here.

use serde_json::{Map, Value, json};

use super::{ApiService, api_services, sorted_by_group_and_version};
use crate::state::ApiServer;

/// The remote APIServices of groups not served here, by group in upstream's order.
fn remote_groups(server: &ApiServer) -> Vec<Vec<ApiService>> {
    let local: Vec<(String, String)> = server.registry().group_versions();
    let remote: Vec<ApiService> = api_services(server)
        .iter()
        .map(ApiService::parse)
        .filter(|a| a.service.is_some() && !a.group.is_empty())
        .filter(|a| !local.iter().any(|(g, _)| *g == a.group))
        .collect();
    sorted_by_group_and_version(remote)
}

fn api_group(services: &[ApiService]) -> Value {
    let versions: Vec<Value> = services
        .iter()
        .map(
            |s| json!({"groupVersion": format!("{}/{}", s.group, s.version), "version": s.version}),
        )
        .collect();
    json!({
        "name": services[0].group,
        "versions": versions,
        "preferredVersion": versions[0],
    })
}

/// The APIGroups of remote groups, for `/apis` after the groups served here.
pub(crate) fn legacy_groups(server: &ApiServer) -> Vec<Value> {
    remote_groups(server).iter().map(|g| api_group(g)).collect()
}

/// `/apis/GROUP` of a remote group.
pub(crate) fn legacy_group(server: &ApiServer, group: &str) -> Option<Value> {
    let services = remote_groups(server)
        .into_iter()
        .find(|g| g[0].group == group)?;
    let mut g = api_group(&services);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// The aggregated-discovery items of remote groups, for `/apis` after the groups served here.
pub(crate) fn aggregated_groups(server: &ApiServer) -> Vec<Value> {
    remote_groups(server)
        .iter()
        .map(|services| {
            let versions: Vec<Value> = services
                .iter()
                .map(|s| {
                    match server
                        .aggregator
                        .discovered(&s.name)
                        .filter(|_| s.available)
                    {
                        Some(resources) => json!({"version": s.version,
                            "resources": aggregated_resources(&resources), "freshness": "Current"}),
                        None => json!({"version": s.version, "freshness": "Stale"}),
                    }
                })
                .collect();
            json!({"metadata": {"name": services[0].group, "creationTimestamp": null},
                "versions": versions})
        })
        .collect()
}

/// An APIResourceList's resources in aggregated form (upstream's
/// `ConvertGroupVersionIntoToDiscovery`): subresources under their resource.
fn aggregated_resources(resources: &[Value]) -> Vec<Value> {
    let kind_of = |r: &Value| {
        json!({"group": r["group"].as_str().unwrap_or_default(),
            "version": r["version"].as_str().unwrap_or_default(),
            "kind": r["kind"].as_str().unwrap_or_default()})
    };
    let mut out: Vec<Value> = Vec::new();
    for r in resources {
        let name = r["name"].as_str().unwrap_or_default();
        if name.contains('/') {
            continue;
        }
        let mut e = Map::new();
        e.insert("resource".into(), json!(name));
        e.insert("responseKind".into(), kind_of(r));
        let scope = if r["namespaced"] == true {
            "Namespaced"
        } else {
            "Cluster"
        };
        e.insert("scope".into(), json!(scope));
        e.insert(
            "singularResource".into(),
            json!(r["singularName"].as_str().unwrap_or_default()),
        );
        e.insert("verbs".into(), r["verbs"].clone());
        for key in ["shortNames", "categories"] {
            if r[key].as_array().is_some_and(|a| !a.is_empty()) {
                e.insert(key.into(), r[key].clone());
            }
        }
        let subs: Vec<Value> = resources
            .iter()
            .filter_map(|s| {
                let sub = s["name"].as_str()?.strip_prefix(name)?.strip_prefix('/')?;
                Some(json!({"subresource": sub, "responseKind": kind_of(s), "verbs": s["verbs"]}))
            })
            .collect();
        if !subs.is_empty() {
            e.insert("subresources".into(), Value::Array(subs));
        }
        out.push(Value::Object(e));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_resources_become_aggregated_ones_with_their_subresources() {
        let got = aggregated_resources(&[
            json!({"name": "flunders", "singularName": "flunder", "namespaced": true,
                "kind": "Flunder", "verbs": ["get", "list"], "shortNames": ["fl"]}),
            json!({"name": "flunders/status", "singularName": "", "namespaced": true,
                "kind": "Flunder", "verbs": ["get"]}),
        ]);
        assert_eq!(
            got,
            [json!({"resource": "flunders",
                "responseKind": {"group": "", "version": "", "kind": "Flunder"},
                "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get", "list"],
                "shortNames": ["fl"],
                "subresources": [{"subresource": "status",
                    "responseKind": {"group": "", "version": "", "kind": "Flunder"},
                    "verbs": ["get"]}]})]
        );
    }
}
