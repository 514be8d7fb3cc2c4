//! The Kubernetes domain, independent of HTTP and storage.
//!
//! Objects travel as `serde_json::Value` in the API server so that fields this crate does not know
//! (newer upstream fields, rollwright's own additions such as `podUpdatePolicy`) are kept as given;
//! typed `k8s-openapi` structs are used where a typed view helps.

#![warn(missing_docs)]

pub mod apply;
pub mod defaults;
pub mod field;
pub mod hash;
pub mod image;
pub mod intstr;
pub mod node_affinity;
pub mod pod;
pub mod quantity;
pub mod quota;
pub mod selector;
pub mod simulated;
pub mod smp;
pub mod taint;
pub mod validation;
