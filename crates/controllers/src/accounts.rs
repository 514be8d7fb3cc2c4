//! The identity each controller acts as: its own ServiceAccount in `kube-system`, as
//! kube-controller-manager runs them with `--use-service-account-credentials`, so that each holds
//! only its `system:controller:*` role's rights. Which account each one is is a column of the
//! controllers' table ([`crate::service_account`]).

use kube::Client;
use std::sync::Arc;

/// A client acting as the ServiceAccount `kube-system/NAME` (for a controller upstream runs with
/// the controller manager's own credentials, `system:kube-controller-manager`: given `None`).
pub type ClientFor = Arc<dyn Fn(Option<&str>) -> Client + Send + Sync>;
