//! The core (legacy, `/api/v1`) group.

mod event;
mod namespace;
mod node;
mod persistentvolume;
mod persistentvolumeclaim;
mod pod;

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
    ]
}
