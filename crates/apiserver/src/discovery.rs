//! API discovery documents: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}` and
//! the aggregated (apidiscovery.k8s.io/v2) form of `/api` and `/apis`.
//!
//! Clients (kubectl, client-go's RESTMapper) learn every resource name, short name, verb and
//! subresource from here, so the documents follow upstream's shapes field for field. They are pure
//! functions of the [`Registry`], so kinds added at run time appear at once.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::registry::{Kind, Registry, Subresource};

/// The media type under which aggregated discovery is served; a request whose `Accept` asks for it
/// on `/api` or `/apis` gets [`aggregated`] instead of the legacy document, and the response's
/// `Content-Type` must repeat it or client-go falls back to legacy discovery.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The Kubernetes version the server claims. The `kubectl` dispatcher on the hosts picks its
/// bundled client by this, so it must stay within one minor of kubectl 1.32. Rollwright's
/// components give it as their version too.
pub const GIT_VERSION: &str = "v1.32.4";

/// Verbs of a main resource endpoint, sorted like upstream.
const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Verbs of kinds without `deletecollection` (upstream refuses deleting namespaces in bulk).
const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Verbs of `status` and `scale`.
const READ_ONLY: &[&str] = &["get", "list"];
const GET_ONLY: &[&str] = &["get"];
/// A connect subresource (`pods/exec`): upstream lists its POST and GET as create and get.
const CONNECT_VERBS: &[&str] = &["create", "get"];
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// Verbs of `binding` and `eviction`.
const CREATE_ONLY: &[&str] = &["create"];
/// `namespaces/finalize`: replaced, nothing else.
const UPDATE_ONLY: &[&str] = &["update"];

/// `/version`: what `kubectl version` prints and what clients use for feature gating.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-22T00:00:00Z",
        "goVersion": "go1.23.8",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`: the legacy core group's versions.
pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

/// `/apis`: every named group with its versions and preferred version.
pub fn api_group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = named_groups(registry)
        .into_iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                .collect();
            let preferred = versions.first().cloned().unwrap_or(Value::Null);
            json!({"name": group, "versions": versions, "preferredVersion": preferred})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/api/v1` (group `""`) or `/apis/{group}/{version}`: the APIResourceList, subresources included
/// as `plural/sub` entries; `None` when the group/version is not served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let kinds = registry.kinds();
    let defs: Vec<&Kind> = kinds
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .map(|k| &**k)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut entries: Vec<(String, Value)> = Vec::new();
    for def in defs {
        entries.push((def.plural.clone(), main_entry(def)));
        for &sub in &def.subresources {
            let name = format!("{}/{}", def.plural, sub.name());
            let mut e = Map::new();
            e.insert("name".into(), json!(name));
            e.insert("singularName".into(), json!(""));
            e.insert("namespaced".into(), json!(def.namespaced));
            if let Some((g, v, _)) = foreign_kind(sub) {
                e.insert("group".into(), json!(g));
                e.insert("version".into(), json!(v));
            }
            e.insert("kind".into(), json!(sub_kind(def, sub)));
            e.insert("verbs".into(), json!(sub_verbs(sub)));
            entries.push((name, Value::Object(e)));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let resources: Vec<Value> = entries.into_iter().map(|(_, v)| v).collect();
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut out = Map::new();
    out.insert("kind".into(), json!("APIResourceList"));
    if !group.is_empty() {
        // Upstream's `/api/v1` carries no apiVersion; the named groups' lists do.
        out.insert("apiVersion".into(), json!("v1"));
    }
    out.insert("groupVersion".into(), json!(group_version));
    out.insert("resources".into(), Value::Array(resources));
    Some(Value::Object(out))
}

/// Aggregated discovery (apidiscovery.k8s.io/v2): `core` selects `/api` (the core group only),
/// otherwise `/apis` (every named group). One request then replaces the per-group-version round
/// trips of legacy discovery.
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![group_discovery(registry, "", &["v1".to_string()])]
    } else {
        named_groups(registry)
            .into_iter()
            .map(|(g, vs)| group_discovery(registry, &g, &vs))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// Named groups in discovery order with their versions (the preferred one first).
fn named_groups(registry: &Registry) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (g, v) in registry.group_versions() {
        if g.is_empty() {
            continue;
        }
        match out.iter_mut().find(|(og, _)| *og == g) {
            Some((_, vs)) => vs.push(v),
            None => out.push((g, vec![v])),
        }
    }
    out
}

/// The verbs of a resource's main endpoint (OpenAPI offers the same operations).
pub(crate) fn verbs(def: &Kind) -> &'static [&'static str] {
    if def.computed {
        READ_ONLY
    } else if !def.is_stored() {
        CREATE_ONLY
    } else if def.delete_collection {
        ALL_VERBS
    } else {
        NAMESPACE_VERBS
    }
}

fn sub_verbs(sub: Subresource) -> &'static [&'static str] {
    match sub {
        Subresource::Status
        | Subresource::Scale
        | Subresource::Approval
        | Subresource::EphemeralContainers => SUBRESOURCE_VERBS,
        Subresource::Binding | Subresource::Eviction | Subresource::Token => CREATE_ONLY,
        Subresource::Finalize => UPDATE_ONLY,
        Subresource::Log => GET_ONLY,
        Subresource::Exec => CONNECT_VERBS,
    }
}

/// The group, version and kind of a subresource whose body is not the parent's kind.
fn foreign_kind(sub: Subresource) -> Option<(&'static str, &'static str, &'static str)> {
    match sub {
        Subresource::Scale => Some(("autoscaling", "v1", "Scale")),
        Subresource::Eviction => Some(("policy", "v1", "Eviction")),
        Subresource::Token => Some(("authentication.k8s.io", "v1", "TokenRequest")),
        Subresource::Status
        | Subresource::Binding
        | Subresource::Approval
        | Subresource::Finalize
        | Subresource::Log
        | Subresource::Exec
        | Subresource::EphemeralContainers => None,
    }
}

fn sub_kind(def: &Kind, sub: Subresource) -> &str {
    match sub {
        Subresource::Status
        | Subresource::Approval
        | Subresource::Finalize
        | Subresource::Log
        | Subresource::EphemeralContainers => &def.kind,
        Subresource::Binding => "Binding",
        Subresource::Exec => "PodExecOptions",
        Subresource::Scale | Subresource::Eviction | Subresource::Token => {
            foreign_kind(sub).map(|(_, _, k)| k).unwrap_or(&def.kind)
        }
    }
}

/// Upstream's storageVersionHash is an opaque digest of the storage group/version/kind that
/// clients only compare for equality; an 8-byte FNV-1a digest, base64'd like upstream, will do.
fn storage_version_hash(def: &Kind) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{}/{}/{}", def.group, def.version, def.kind).bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    base64::engine::general_purpose::STANDARD.encode(h.to_be_bytes())
}

fn main_entry(def: &Kind) -> Value {
    let mut e = Map::new();
    e.insert("name".into(), json!(def.plural));
    e.insert("singularName".into(), json!(def.singular));
    e.insert("namespaced".into(), json!(def.namespaced));
    e.insert("kind".into(), json!(def.kind));
    e.insert("verbs".into(), json!(verbs(def)));
    if !def.short_names.is_empty() {
        e.insert("shortNames".into(), json!(def.short_names));
    }
    if !def.categories.is_empty() {
        e.insert("categories".into(), json!(def.categories));
    }
    // Upstream gives a hash only where objects are stored (not for the review kinds).
    if def.is_stored() {
        e.insert(
            "storageVersionHash".into(),
            json!(storage_version_hash(def)),
        );
    }
    Value::Object(e)
}

fn group_discovery(registry: &Registry, group: &str, versions: &[String]) -> Value {
    let kinds = registry.kinds();
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let mut defs: Vec<&Kind> = kinds
                .iter()
                .filter(|r| r.group == group && r.version == *v)
                .map(|k| &**k)
                .collect();
            defs.sort_by(|a, b| a.plural.cmp(&b.plural));
            let resources: Vec<Value> = defs.into_iter().map(resource_discovery).collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let mut metadata = Map::new();
    if !group.is_empty() {
        metadata.insert("name".into(), json!(group));
    }
    metadata.insert("creationTimestamp".into(), Value::Null);
    json!({"metadata": metadata, "versions": versions})
}

fn resource_discovery(def: &Kind) -> Value {
    let mut e = Map::new();
    e.insert("resource".into(), json!(def.plural));
    // Upstream leaves group and version empty when the kind is the resource's own.
    e.insert(
        "responseKind".into(),
        json!({"group": "", "version": "", "kind": def.kind}),
    );
    e.insert(
        "scope".into(),
        json!(if def.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }),
    );
    e.insert("singularResource".into(), json!(def.singular));
    e.insert("verbs".into(), json!(verbs(def)));
    if !def.short_names.is_empty() {
        e.insert("shortNames".into(), json!(def.short_names));
    }
    if !def.categories.is_empty() {
        e.insert("categories".into(), json!(def.categories));
    }
    let mut subs: Vec<Subresource> = def.subresources.clone();
    subs.sort_by_key(|s| s.name());
    if !subs.is_empty() {
        let subs: Vec<Value> = subs
            .into_iter()
            .map(|sub| {
                let (g, v) = foreign_kind(sub)
                    .map(|(g, v, _)| (g, v))
                    .unwrap_or(("", ""));
                json!({
                    "subresource": sub.name(),
                    "responseKind": {"group": g, "version": v, "kind": sub_kind(def, sub)},
                    "verbs": sub_verbs(sub),
                })
            })
            .collect();
        e.insert("subresources".into(), Value::Array(subs));
    }
    Value::Object(e)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;

    fn registry() -> Registry {
        Registry::new()
    }

    fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    }

    #[test]
    fn version_is_at_most_1_32() {
        let v = version();
        assert_eq!(v["gitVersion"], "v1.32.4");
        assert_eq!(v["major"], "1");
        assert_eq!(v["minor"], "32");
        assert_eq!(v["platform"], "linux/amd64");
    }

    #[test]
    fn api_versions_lists_v1() {
        let v = api_versions();
        assert_eq!(v["kind"], "APIVersions");
        assert_eq!(v["versions"], json!(["v1"]));
    }

    #[test]
    fn group_list_has_named_groups_with_preferred_version() {
        let l = api_group_list(&registry());
        assert_eq!(l["kind"], "APIGroupList");
        let names: Vec<&str> = l["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(names[0], "apps");
        for g in ["storage.k8s.io", "coordination.k8s.io"] {
            assert!(names.contains(&g), "{g} in {names:?}");
        }
        let apps = &l["groups"][0];
        assert_eq!(
            apps["preferredVersion"],
            json!({"groupVersion": "apps/v1", "version": "v1"})
        );
        assert_eq!(apps["versions"][0]["groupVersion"], "apps/v1");
    }

    #[test]
    fn every_resource_appears_with_short_names_and_verbs() {
        let r = registry();
        for def in r.kinds().iter() {
            let list = resource_list(&r, &def.group, &def.version).unwrap();
            let e = find(&list, &def.plural);
            assert_eq!(e["kind"], def.kind);
            assert_eq!(e["singularName"], def.singular);
            assert_eq!(e["namespaced"], def.namespaced);
            let short: Vec<&str> = e["shortNames"]
                .as_array()
                .map(|a| a.iter().map(|s| s.as_str().unwrap()).collect())
                .unwrap_or_default();
            assert_eq!(short, def.short_names, "{}", def.plural);
            if !def.is_stored() {
                let verbs = if def.computed {
                    json!(["get", "list"])
                } else {
                    json!(["create"])
                };
                assert_eq!(e["verbs"], verbs, "{}", def.plural);
                assert!(e.get("storageVersionHash").is_none());
                continue;
            }
            assert!(e["verbs"].as_array().unwrap().contains(&json!("watch")));
            assert!(e["storageVersionHash"].as_str().unwrap().len() >= 8);
            for sub in &def.subresources {
                find(&list, &format!("{}/{}", def.plural, sub.name()));
            }
        }
    }

    #[test]
    fn core_list_has_no_api_version_and_named_lists_do() {
        let core = resource_list(&registry(), "", "v1").unwrap();
        assert_eq!(core["groupVersion"], "v1");
        assert!(core.get("apiVersion").is_none());
        let apps = resource_list(&registry(), "apps", "v1").unwrap();
        assert_eq!(apps["groupVersion"], "apps/v1");
        assert_eq!(apps["apiVersion"], "v1");
        assert!(resource_list(&registry(), "example.com", "v1").is_none());
    }

    #[test]
    fn review_kinds_are_create_only_as_upstream_lists_them() {
        let authn = resource_list(&registry(), "authentication.k8s.io", "v1").unwrap();
        assert_eq!(
            authn["resources"],
            json!([
                {"name": "selfsubjectreviews", "singularName": "selfsubjectreview",
                 "namespaced": false, "kind": "SelfSubjectReview", "verbs": ["create"]},
                {"name": "tokenreviews", "singularName": "tokenreview", "namespaced": false,
                 "kind": "TokenReview", "verbs": ["create"]},
            ])
        );
        let authz = resource_list(&registry(), "authorization.k8s.io", "v1").unwrap();
        let names: Vec<(&str, bool)> = authz["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap(),
                    r["namespaced"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("localsubjectaccessreviews", true),
                ("selfsubjectaccessreviews", false),
                ("selfsubjectrulesreviews", false),
                ("subjectaccessreviews", false),
            ]
        );
        let agg = aggregated(&registry(), false);
        let group = agg["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "authorization.k8s.io")
            .unwrap();
        let sar = &group["versions"][0]["resources"][3];
        assert_eq!(sar["resource"], "subjectaccessreviews");
        assert_eq!(sar["verbs"], json!(["create"]));
        assert_eq!(sar["scope"], "Cluster");
    }

    #[test]
    fn subresource_entries_match_upstream() {
        let core = resource_list(&registry(), "", "v1").unwrap();
        let cases = [
            (
                &core,
                "pods/binding",
                json!(null),
                json!(null),
                "Binding",
                json!(["create"]),
            ),
            (
                &core,
                "pods/eviction",
                json!("policy"),
                json!("v1"),
                "Eviction",
                json!(["create"]),
            ),
            (
                &core,
                "serviceaccounts/token",
                json!("authentication.k8s.io"),
                json!("v1"),
                "TokenRequest",
                json!(["create"]),
            ),
            (
                &core,
                "pods/status",
                json!(null),
                json!(null),
                "Pod",
                json!(["get", "patch", "update"]),
            ),
        ];
        let apps = resource_list(&registry(), "apps", "v1").unwrap();
        let scale = find(&apps, "deployments/scale");
        assert_eq!(scale["group"], "autoscaling");
        assert_eq!(scale["version"], "v1");
        assert_eq!(scale["kind"], "Scale");
        assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
        for (list, name, group, version, kind, verbs) in cases {
            let e = find(list, name);
            assert_eq!(
                e.get("group").cloned().unwrap_or(Value::Null),
                group,
                "{name}"
            );
            assert_eq!(
                e.get("version").cloned().unwrap_or(Value::Null),
                version,
                "{name}"
            );
            assert_eq!(e["kind"], kind, "{name}");
            assert_eq!(e["verbs"], verbs, "{name}");
            assert_eq!(e["singularName"], "", "{name}");
        }
        // Sorted by name, so subresources follow their parent.
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn namespaces_have_no_deletecollection() {
        let core = resource_list(&registry(), "", "v1").unwrap();
        assert!(
            !find(&core, "namespaces")["verbs"]
                .as_array()
                .unwrap()
                .contains(&json!("deletecollection"))
        );
        assert!(
            find(&core, "pods")["verbs"]
                .as_array()
                .unwrap()
                .contains(&json!("deletecollection"))
        );
    }

    #[test]
    fn aggregated_core_and_groups() {
        let core = aggregated(&registry(), true);
        assert_eq!(core["kind"], "APIGroupDiscoveryList");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        let items = core["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert!(items[0]["metadata"].get("name").is_none());
        let v1 = &items[0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        assert_eq!(v1["freshness"], "Current");
        let pods = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["singularResource"], "pod");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        assert_eq!(
            pods["responseKind"],
            json!({"group": "", "version": "", "kind": "Pod"})
        );
        let eviction = pods["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "eviction")
            .unwrap();
        assert_eq!(
            eviction["responseKind"],
            json!({"group": "policy", "version": "v1", "kind": "Eviction"})
        );
        assert_eq!(eviction["verbs"], json!(["create"]));

        let groups = aggregated(&registry(), false);
        let items = groups["items"].as_array().unwrap();
        let names: Vec<&str> = items
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names[0], "apps");
        let nodes_scope = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "nodes")
            .map(|r| r["scope"].clone());
        assert_eq!(nodes_scope, Some(json!("Cluster")));
        let deploy = items[0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        let scale = deploy["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "scale")
            .unwrap();
        assert_eq!(
            scale["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        // Every served resource is in exactly one aggregated document.
        let total: usize = [&core, &groups]
            .iter()
            .flat_map(|d| d["items"].as_array().unwrap().iter())
            .flat_map(|i| i["versions"].as_array().unwrap().iter())
            .map(|v| v["resources"].as_array().unwrap().len())
            .sum();
        assert_eq!(total, registry().kinds().len());
    }

    #[test]
    fn storage_version_hash_is_stable_and_distinct() {
        let kinds = registry().kinds();
        let a = storage_version_hash(&kinds[0]);
        assert_eq!(a, storage_version_hash(&kinds[0]));
        assert_ne!(a, storage_version_hash(&kinds[1]));
        assert_eq!(a.len(), 12);
    }
}
