//! The volume controller, as upstream's PersistentVolume and PVC-protection controllers with a
//! simulated provisioner in place of a CSI driver: claims that name no class get the default
//! one ([`class`]); claims of a class whose provisioner is [`class::SIMULATED_PROVISIONER`] get
//! a volume of their size, pinned to their first pod's node for `WaitForFirstConsumer`
//! ([`provision`]); claims and volumes are bound both ways and volumes whose claim is gone are
//! released or deleted per their reclaim policy ([`binding`]); and a claim is kept while a pod
//! uses it ([`protection`]).

pub mod binding;
pub mod class;
pub mod protection;
pub mod provision;
