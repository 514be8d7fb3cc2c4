//! The core (legacy, `/api/v1`) group.

mod config;
mod event;
mod namespace;
mod node;
mod persistentvolume;
mod persistentvolumeclaim;
mod pod;
pub(crate) mod service;
mod workload_objects;

use super::Kind;

/// The core/v1 kinds, in discovery order.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        namespace::kind(),
        node::kind(),
        pod::kind(),
        event::kind(),
        persistentvolumeclaim::kind(),
        persistentvolume::kind(),
        config::config_map(),
        config::secret(),
        service::service(),
        service::endpoints(),
        workload_objects::service_account(),
        workload_objects::pod_template(),
        workload_objects::replication_controller(),
        workload_objects::resource_quota(),
        workload_objects::limit_range(),
    ]
}
