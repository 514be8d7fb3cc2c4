//! `rollwright install`: the manifests that run rollwright's workload controllers on a real
//! cluster as its operators run kube-controller-manager, beside the cluster's own controller
//! manager with the same controllers turned off.
//!
//! - One ServiceAccount for the process, bound to exactly the ClusterRoles upstream's bootstrap
//!   policy gives the controllers it replaces (`system:controller:deployment-controller`, ...), so
//!   that it may write what they write and nothing more.
//! - Upstream's controllers read through shared informers that run as
//!   `system:kube-controller-manager`, which may list and watch everything; here the process reads
//!   as its own ServiceAccount, so a ClusterRole grants it `list` and `watch` on just the kinds its
//!   caches hold that those roles leave out (Namespaces for the rollback switch, budgets, PVCs for
//!   the StatefulSet controller), and the one write rollwright's own features add: a budget's
//!   status, as an eviction writes it ([`extra_rules`]).
//! - A Role on its own Lease in its own namespace (upstream's controller manager holds its Lease
//!   in kube-system through `system::leader-locking-kube-controller-manager`).
//! - Two replicas with leader election, probes on `/healthz` and `/readyz`, `/metrics`, resource
//!   requests, a security context that passes Pod Security `restricted` (the namespace enforces
//!   it), and a PodDisruptionBudget that keeps one replica through a drain.

use serde_json::{Value, json};
use std::time::Duration;

/// The controllers `install` can run: the workload controllers, whose reads beyond their roles
/// are known ([`extra_rules`]).
pub const INSTALLABLE: [&str; 4] = ["deployment", "replicaset", "daemonset", "statefulset"];

/// kube-controller-manager's secure port, which `controllers` serves its status on in the pod.
pub const CONTROLLERS_PORT: u16 = 10257;

/// The name of the process's ServiceAccount, Deployment, Lease and the rest.
pub const NAME: &str = "rollwright-controllers";

/// What to install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Install {
    /// Controller names as `--controllers` takes them (`deployment`, ...).
    pub controllers: Vec<String>,
    /// The namespace everything namespaced goes in.
    pub namespace: String,
    /// The image holding the `rollwright` binary.
    pub image: String,
}

/// Why the manifests cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InstallError {
    /// A controller `install` cannot run (yet).
    #[error(
        "install runs only the workload controllers ({known}), not {0:?}",
        known = INSTALLABLE.join(", ")
    )]
    NotInstallable(String),
    /// No controller named.
    #[error("--controllers names no controller")]
    Empty,
}

impl Install {
    /// Checks the names and drops duplicates, keeping the order given.
    pub fn new(controllers: &[String], namespace: &str, image: &str) -> Result<Self, InstallError> {
        let mut names: Vec<String> = Vec::new();
        for name in controllers
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
        {
            if !INSTALLABLE.contains(&name) {
                return Err(InstallError::NotInstallable(name.to_owned()));
            }
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
        if names.is_empty() {
            return Err(InstallError::Empty);
        }
        Ok(Self {
            controllers: names,
            namespace: namespace.to_owned(),
            image: image.to_owned(),
        })
    }

    /// The ServiceAccount upstream runs each controller as (`deployment-controller`, ...).
    fn accounts(&self) -> Vec<&'static str> {
        self.controllers
            .iter()
            .filter_map(|c| controllers::service_account(c))
            .collect()
    }

    /// The line that turns the same controllers off in the cluster's own controller manager.
    pub fn kube_controller_manager_flag(&self) -> String {
        let off: Vec<String> = self.controllers.iter().map(|c| format!("-{c}")).collect();
        format!("--controllers='*,{}'", off.join(","))
    }

    /// Every object, in the order they are applied (the Namespace first).
    pub fn manifests(&self) -> Vec<Value> {
        let ns = self.namespace.as_str();
        let labels =
            json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "rollwright"});
        let subject = json!([{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]);
        let mut all = vec![
            json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/warn": "restricted",
                }},
            }),
            json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": NAME, "namespace": ns, "labels": labels},
            }),
        ];
        for account in self.accounts() {
            all.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("rollwright:controller:{account}"), "labels": labels},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": format!("system:controller:{account}"),
                },
                "subjects": subject,
            }));
        }
        let rules = extra_rules(&self.controllers);
        if !rules.is_empty() {
            let name = format!("rollwright:controllers:{ns}:extra");
            all.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name, "labels": labels},
                "rules": rules,
            }));
            all.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subject,
            }));
        }
        let lease_role = format!("{NAME}-leader-election");
        all.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": lease_role, "namespace": ns, "labels": labels},
            // `create` cannot be limited to a name (the object does not exist yet).
            "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                // `list` and `watch` by name (a field selector on metadata.name): a standby watches
                // the leader's renewals to take over the moment its lease expires.
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "resourceNames": [NAME], "verbs": ["get", "update", "list", "watch"]},
            ],
        }));
        all.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": lease_role, "namespace": ns, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": lease_role},
            "subjects": subject,
        }));
        all.push(self.deployment(&labels));
        all.push(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": NAME, "namespace": ns, "labels": labels},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
        }));
        all
    }

    fn deployment(&self, labels: &Value) -> Value {
        let port = CONTROLLERS_PORT;
        let probe = |path: &str, period: u32| {
            json!({
                "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
                "periodSeconds": period, "timeoutSeconds": 5, "failureThreshold": 3,
            })
        };
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": self.namespace, "labels": labels},
            "spec": {
                // Two for availability: one leads, the other takes over within the lease duration.
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels, "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/scheme": "https",
                        "prometheus.io/port": port.to_string(),
                        "prometheus.io/path": "/metrics",
                    }},
                    "spec": {
                        "serviceAccountName": NAME,
                        "securityContext": {
                            "runAsNonRoot": true,
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        // The replicas on different nodes where there are several.
                        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": labels},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }]}},
                        "containers": [{
                            "name": "controllers",
                            "image": self.image,
                            "args": [
                                "controllers",
                                format!("--controllers={}", self.controllers.join(",")),
                                format!("--leader-elect-resource-namespace={}", self.namespace),
                                // All interfaces inside the pod, for the kubelet's probes and
                                // Prometheus.
                                "--bind-address=0.0.0.0",
                                format!("--secure-port={port}"),
                            ],
                            "ports": [{"name": "https", "containerPort": port, "protocol": "TCP"}],
                            "livenessProbe": probe("/healthz", 10),
                            "readinessProbe": probe("/readyz", 5),
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": false,
                                "readOnlyRootFilesystem": true,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }],
                    },
                },
            },
        })
    }
}

/// What the controllers need beyond what their bootstrap roles grant, as RBAC rules:
/// - the Deployment, DaemonSet and StatefulSet controllers list and watch Namespaces (a
///   workload's automatic rollback may be switched on by its Namespace's annotation), and every
///   workload controller PodDisruptionBudgets (budget-aware updates,
///   `rollwright.io/honor-disruption-budgets`, are asked per workload);
/// - the ReplicaSet, DaemonSet and StatefulSet controllers spend a budget's disruption by
///   updating its status, as an eviction does (upstream's roles give that to the disruption
///   controller alone);
/// - the ReplicaSet controller reads the Deployments owning its ReplicaSets (whether they ask the
///   budgets), the StatefulSet controller its PVCs.
pub fn extra_rules(controllers: &[String]) -> Vec<Value> {
    let has = |name: &str| controllers.iter().any(|c| c == name);
    let any = |names: &[&str]| names.iter().any(|n| has(n));
    let mut core = Vec::new();
    let mut rules = Vec::new();
    if any(&["deployment", "daemonset", "statefulset"]) {
        core.push("namespaces");
    }
    if any(&["deployment", "replicaset", "daemonset", "statefulset"]) {
        rules.push(json!({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]}));
    }
    if has("statefulset") {
        core.push("persistentvolumeclaims");
    }
    if !core.is_empty() {
        rules.insert(
            0,
            json!({"apiGroups": [""], "resources": core, "verbs": ["list", "watch"]}),
        );
    }
    if has("replicaset") && !has("deployment") {
        rules.push(json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]}));
    }
    if any(&["replicaset", "daemonset", "statefulset"]) {
        rules.push(json!({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets/status"], "verbs": ["update"]}));
    }
    rules
}

/// The manifests as one YAML stream.
pub fn yaml(manifests: &[Value]) -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for m in manifests {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(m)?);
    }
    Ok(out)
}

/// Applies `manifests` in order with server-side apply (field manager `rollwright-install`), and
/// answers what it applied (`kind/name`).
pub async fn apply(client: &kube::Client, manifests: &[Value]) -> Result<Vec<String>, ApplyError> {
    let params = kube::api::PatchParams::apply("rollwright-install");
    let mut applied = Vec::new();
    for manifest in manifests {
        let object: kube::api::DynamicObject = serde_json::from_value(manifest.clone())?;
        let types = object.types.clone().unwrap_or_default();
        let gvk = kube::api::GroupVersionKind::try_from(&types)?;
        let plural = plural(&gvk.kind).ok_or_else(|| ApplyError::Kind(gvk.kind.clone()))?;
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: kube::Api<kube::api::DynamicObject> = match &object.metadata.namespace {
            Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &resource),
            None => kube::Api::all_with(client.clone(), &resource),
        };
        let name = object.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &kube::api::Patch::Apply(manifest))
            .await
            .map_err(|error| ApplyError::Api {
                what: format!("{}/{name}", gvk.kind),
                error: Box::new(error),
            })?;
        applied.push(format!("{}/{name}", gvk.kind));
    }
    Ok(applied)
}

/// The resources of the kinds [`Install::manifests`] holds.
fn plural(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "Deployment" => "deployments",
        "PodDisruptionBudget" => "poddisruptionbudgets",
        _ => return None,
    })
}

/// Why applying failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A manifest is no Kubernetes object (a bug here).
    #[error("a manifest is no object: {0}")]
    Manifest(#[from] serde_json::Error),
    /// A manifest without apiVersion or kind (a bug here).
    #[error("a manifest without its type: {0}")]
    Type(#[from] kube::core::gvk::ParseGroupVersionError),
    /// A kind this module does not know the resource of (a bug here).
    #[error("no resource known for kind {0}")]
    Kind(String),
    /// The API server refused.
    #[error("applying {what}")]
    Api {
        /// `kind/name`.
        what: String,
        /// Its answer.
        #[source]
        error: Box<kube::Error>,
    },
}

/// How long ago the cluster's own controller manager last renewed its Lease
/// (`kube-system/kube-controller-manager`); `None` without one (or without the right to read it).
pub async fn controller_manager_renewed(client: &kube::Client) -> Option<Duration> {
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), "kube-system");
    let lease = leases.get_opt("kube-controller-manager").await.ok()??;
    let renewed = lease.spec?.renew_time?.0;
    let ago = jiff::Timestamp::now().duration_since(renewed);
    Some(Duration::try_from(ago).unwrap_or(Duration::ZERO))
}

/// The cluster's own controller manager seems to run when its Lease was renewed this recently
/// (upstream's lease is 15 s long and renewed every 2 s).
pub const RECENT: Duration = Duration::from_secs(60);

/// Whether a Lease renewed `since_renewal` ago (None: never, or no Lease) shows a running holder.
pub fn held_recently(since_renewal: Option<Duration>) -> bool {
    since_renewal.is_some_and(|d| d <= RECENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install(names: &[&str]) -> Install {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        Install::new(&names, "rollwright-system", "localhost/rollwright:0.1.0")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn each_controller_is_bound_to_its_upstream_role_and_nothing_else_is_bound() {
        let all = install(&["deployment", "replicaset", "daemonset", "statefulset"]).manifests();
        let bound: Vec<&str> = all
            .iter()
            .filter(|m| m["kind"] == "ClusterRoleBinding")
            .filter_map(|m| m["roleRef"]["name"].as_str())
            .collect();
        assert_eq!(
            bound,
            [
                "system:controller:deployment-controller",
                "system:controller:replicaset-controller",
                "system:controller:daemon-set-controller",
                "system:controller:statefulset-controller",
                "rollwright:controllers:rollwright-system:extra",
            ]
        );
        // Every role bound exists in upstream's bootstrap policy, but the reads this process adds.
        let policy = authz::bootstrap::policy();
        for name in bound.iter().filter(|n| n.starts_with("system:")) {
            assert!(
                policy
                    .cluster_roles
                    .iter()
                    .any(|r| r.metadata.name.as_deref() == Some(name)),
                "{name}"
            );
        }
        let reads = all
            .iter()
            .find(|m| m["kind"] == "ClusterRole")
            .map(|m| m["rules"].clone());
        assert_eq!(
            reads,
            Some(json!([
                {"apiGroups": [""], "resources": ["namespaces", "persistentvolumeclaims"], "verbs": ["list", "watch"]},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets/status"], "verbs": ["update"]},
            ]))
        );
    }

    #[test]
    fn the_replicaset_controller_alone_reads_deployments_and_budgets() {
        let all = install(&["replicaset", "replicaset"]).manifests();
        let rules = all
            .iter()
            .find(|m| m["kind"] == "ClusterRole")
            .map(|m| m["rules"].clone());
        assert_eq!(
            rules,
            Some(json!([
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"]},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets/status"], "verbs": ["update"]},
            ]))
        );
        assert_eq!(
            all.iter()
                .filter(|m| m["kind"] == "ClusterRoleBinding")
                .count(),
            2
        );
    }

    #[test]
    fn the_flag_turns_the_same_controllers_off_upstream() {
        assert_eq!(
            install(&["deployment", "replicaset", "daemonset", "statefulset"])
                .kube_controller_manager_flag(),
            "--controllers='*,-deployment,-replicaset,-daemonset,-statefulset'"
        );
    }

    #[test]
    fn only_workload_controllers_install() {
        let names = vec!["deployment".to_owned(), "job".to_owned()];
        assert_eq!(
            Install::new(&names, "x", "y"),
            Err(InstallError::NotInstallable("job".into()))
        );
        assert_eq!(Install::new(&[], "x", "y"), Err(InstallError::Empty));
    }

    #[test]
    fn the_pod_runs_as_pod_security_restricted_asks() {
        let all = install(&["deployment"]).manifests();
        let deployment = all
            .iter()
            .find(|m| m["kind"] == "Deployment")
            .cloned()
            .unwrap_or_default();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let container = &pod["containers"][0]["securityContext"];
        assert_eq!(container["allowPrivilegeEscalation"], false);
        assert_eq!(container["readOnlyRootFilesystem"], true);
        assert_eq!(container["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(deployment["spec"]["replicas"], 2);
    }

    #[test]
    fn a_lease_renewed_within_a_minute_means_the_cluster_manager_runs() {
        assert!(held_recently(Some(Duration::from_secs(3))));
        assert!(!held_recently(Some(Duration::from_secs(3600))));
        assert!(!held_recently(None));
    }
}
