//! The identity each controller acts as: its own ServiceAccount in `kube-system`, as
//! kube-controller-manager runs them with `--use-service-account-credentials`, so that each holds
//! only its `system:controller:*` role's rights.

use kube::Client;
use std::sync::Arc;

/// A client acting as the ServiceAccount `kube-system/NAME` (for a controller upstream runs with
/// the controller manager's own credentials, `system:kube-controller-manager`: given `None`).
pub type ClientFor = Arc<dyn Fn(Option<&str>) -> Client + Send + Sync>;

/// The ServiceAccount upstream's controller of this name runs as; `None` for those that use the
/// controller manager's own identity.
pub fn service_account(controller: &str) -> Option<&'static str> {
    Some(match controller {
        "replicaset" => "replicaset-controller",
        "replicationcontroller" => "replication-controller",
        "deployment" => "deployment-controller",
        "daemonset" => "daemon-set-controller",
        "garbagecollector" => "generic-garbage-collector",
        "podgc" => "pod-garbage-collector",
        "nodelifecycle" => "node-controller",
        "serviceaccount" => "service-account-controller",
        "root-ca-cert-publisher" => "root-ca-cert-publisher",
        "namespace" => "namespace-controller",
        "statefulset" => "statefulset-controller",
        "persistentvolume-binder" => "persistent-volume-binder",
        "job" => "job-controller",
        "cronjob" => "cronjob-controller",
        "ttl-after-finished" => "ttl-after-finished-controller",
        "resourcequota" => "resourcequota-controller",
        "disruption" => "disruption-controller",
        "endpoint" => "endpoint-controller",
        "endpointslice" => "endpointslice-controller",
        "clusterrole-aggregation" => "clusterrole-aggregation-controller",
        _ => return None,
    })
}
