//! What the server serves, and which resource a name on the command line means (`po`, `pods`,
//! `Pod`, `deployments.apps`, `deploy`), as kubectl's RESTMapper resolves it.
//!
//! One request per scope with aggregated discovery (`apidiscovery.k8s.io/v2`, served by
//! rollwright and every cluster since 1.30); older servers get the per-group lists.

use super::{failure::Explain, kubeconfig::Session};
use anyhow::{Context, bail};
use kube::api::ApiResource;
use serde_json::Value;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
                          application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,\
                          application/json";

/// One resource the server serves (its main resource, not subresources).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: String,
    /// The group's preferred version.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource name, e.g. `deployments`.
    pub plural: String,
    /// Singular name, e.g. `deployment`.
    pub singular: String,
    /// Short names, e.g. `deploy`.
    pub short_names: Vec<String>,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Verbs served.
    pub verbs: Vec<String>,
}

impl Resource {
    /// The client's description of it.
    pub fn api_resource(&self) -> ApiResource {
        let api_version = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version,
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    /// kubectl's name for objects of it in messages: `deployment.apps`, `pod`.
    pub fn type_name(&self) -> String {
        let kind = self.kind.to_lowercase();
        if self.group.is_empty() {
            kind
        } else {
            format!("{kind}.{}", self.group)
        }
    }

    /// The resource qualified by group: `deployments.apps`, `pods`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        [self.plural.as_str(), self.singular.as_str()]
            .into_iter()
            .chain(self.short_names.iter().map(String::as_str))
    }
}

/// Everything the server serves, core group first.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// The resources.
    pub resources: Vec<Resource>,
}

/// Reads the `resources` of one version of an aggregated discovery document.
fn aggregated_resources(group: &str, version: &Value) -> Vec<Resource> {
    let v = version["version"].as_str().unwrap_or_default();
    version["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let plural = r["resource"].as_str()?;
            Some(Resource {
                group: group.to_string(),
                version: v.to_string(),
                kind: r["responseKind"]["kind"].as_str()?.to_string(),
                plural: plural.to_string(),
                singular: r["singularResource"].as_str().unwrap_or(plural).to_string(),
                short_names: strings(&r["shortNames"]),
                namespaced: r["scope"] == "Namespaced",
                verbs: strings(&r["verbs"]),
            })
        })
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Reads an `APIGroupDiscoveryList`: the first (preferred) version of each group.
fn from_aggregated(list: &Value) -> Option<Vec<Resource>> {
    if list["kind"] != "APIGroupDiscoveryList" {
        return None;
    }
    let mut out = Vec::new();
    for group in list["items"].as_array()? {
        let name = group["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(version) = group["versions"].as_array().and_then(|v| v.first()) {
            out.extend(aggregated_resources(name, version));
        }
    }
    Some(out)
}

/// Reads a legacy `APIResourceList` of `group`/`version`.
fn from_resource_list(group: &str, version: &str, list: &Value) -> Vec<Resource> {
    list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let plural = r["name"].as_str()?;
            if plural.contains('/') {
                return None;
            }
            let singular = r["singularName"].as_str().filter(|s| !s.is_empty());
            Some(Resource {
                group: group.to_string(),
                version: version.to_string(),
                kind: r["kind"].as_str()?.to_string(),
                plural: plural.to_string(),
                singular: singular.map_or_else(
                    || r["kind"].as_str().unwrap_or(plural).to_lowercase(),
                    str::to_string,
                ),
                short_names: strings(&r["shortNames"]),
                namespaced: r["namespaced"].as_bool().unwrap_or(true),
                verbs: strings(&r["verbs"]),
            })
        })
        .collect()
}

async fn get_json(session: &Session, path: &str, accept: &str) -> anyhow::Result<Value> {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())
        .context("building a discovery request")?;
    let text = session
        .client
        .request_text(req)
        .await
        .explain(session, None)?;
    serde_json::from_str(&text).with_context(|| format!("reading {path} from {}", session.server))
}

impl Catalog {
    /// Asks the server what it serves.
    pub async fn discover(session: &Session) -> anyhow::Result<Catalog> {
        let core = get_json(session, "/api", AGGREGATED).await?;
        if let Some(mut resources) = from_aggregated(&core) {
            let groups = get_json(session, "/apis", AGGREGATED).await?;
            resources.extend(from_aggregated(&groups).unwrap_or_default());
            return Ok(Catalog { resources });
        }
        let mut resources = from_resource_list(
            "",
            "v1",
            &get_json(session, "/api/v1", "application/json").await?,
        );
        let groups = get_json(session, "/apis", "application/json").await?;
        for group in groups["groups"].as_array().into_iter().flatten() {
            let (Some(name), Some(gv)) = (
                group["name"].as_str(),
                group["preferredVersion"]["groupVersion"].as_str(),
            ) else {
                continue;
            };
            let version = gv.rsplit('/').next().unwrap_or(gv);
            let list = get_json(session, &format!("/apis/{gv}"), "application/json").await?;
            resources.extend(from_resource_list(name, version, &list));
        }
        Ok(Catalog { resources })
    }

    /// The resource `name` means: a plural, singular, short name or kind, optionally qualified
    /// by group (`deployments.apps`) or version and group (`deployments.v1.apps`).
    pub fn resolve(&self, name: &str) -> anyhow::Result<&Resource> {
        let lower = name.to_lowercase();
        let (base, qualifier) = match lower.split_once('.') {
            Some((b, q)) => (b.to_string(), Some(q.to_string())),
            None => (lower.clone(), None),
        };
        let group_matches = |r: &Resource| match &qualifier {
            None => true,
            Some(q) => {
                *q == r.group
                    || q.split_once('.')
                        .is_some_and(|(v, g)| v == r.version && g == r.group)
            }
        };
        let by_name = self
            .resources
            .iter()
            .filter(|r| group_matches(r))
            .find(|r| r.names().any(|n| n == base));
        let by_kind = || {
            self.resources
                .iter()
                .filter(|r| group_matches(r))
                .find(|r| r.kind.to_lowercase() == base)
        };
        match by_name.or_else(by_kind) {
            Some(r) => Ok(r),
            None => {
                let known: Vec<&str> = self.resources.iter().map(|r| r.plural.as_str()).collect();
                bail!(
                    "unknown resource type {name:?}: the server serves {}",
                    known.join(", ")
                )
            }
        }
    }

    /// The resource of `kind` in `api_version` (`apps/v1`), for manifests.
    pub fn for_kind(&self, api_version: &str, kind: &str) -> Option<Resource> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.resources
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .map(|r| Resource {
                version: version.to_string(),
                ..r.clone()
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        let core = json!({"kind": "APIGroupDiscoveryList", "items": [{"metadata": {"name": ""},
        "versions": [{"version": "v1", "resources": [
            {"resource": "pods", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
             "scope": "Namespaced", "singularResource": "pod", "shortNames": ["po"], "verbs": ["get"]},
            {"resource": "nodes", "responseKind": {"group": "", "version": "v1", "kind": "Node"},
             "scope": "Cluster", "singularResource": "node", "shortNames": ["no"], "verbs": ["get"]}
        ]}]}]});
        let groups = json!({"kind": "APIGroupDiscoveryList", "items": [{"metadata": {"name": "apps"},
        "versions": [{"version": "v1", "resources": [
            {"resource": "deployments", "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
             "scope": "Namespaced", "singularResource": "deployment", "shortNames": ["deploy"], "verbs": ["get"]},
            {"resource": "daemonsets", "responseKind": {"group": "apps", "version": "v1", "kind": "DaemonSet"},
             "scope": "Namespaced", "singularResource": "daemonset", "shortNames": ["ds"], "verbs": ["get"]}
        ]}]}]});
        let mut resources = from_aggregated(&core).expect("core");
        resources.extend(from_aggregated(&groups).expect("groups"));
        Catalog { resources }
    }

    #[test]
    fn names_resolve_as_kubectl_resolves_them() {
        let c = catalog();
        for (name, want) in [
            ("po", "pods"),
            ("pods", "pods"),
            ("pod", "pods"),
            ("Pod", "pods"),
            ("no", "nodes"),
            ("deploy", "deployments"),
            ("deployments.apps", "deployments"),
            ("deployment.v1.apps", "deployments"),
            ("DaemonSet", "daemonsets"),
            ("ds", "daemonsets"),
        ] {
            assert_eq!(c.resolve(name).expect(name).plural, want, "{name}");
        }
        assert!(c.resolve("deployments.batch").is_err());
        let err = c.resolve("widgets").unwrap_err().to_string();
        assert!(err.contains("\"widgets\""), "{err}");
        let ds = c.resolve("ds").expect("ds");
        assert_eq!(ds.type_name(), "daemonset.apps");
        assert_eq!(ds.qualified(), "daemonsets.apps");
        assert!(!c.resolve("no").expect("nodes").namespaced);
    }

    #[test]
    fn legacy_lists_skip_subresources() {
        let list = json!({"resources": [
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"], "shortNames": ["po"]},
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]}
        ]});
        let r = from_resource_list("", "v1", &list);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].singular, "pod");
    }
}
