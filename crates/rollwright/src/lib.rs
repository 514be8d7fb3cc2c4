//! The rollwright binary's library: the embedded control plane and the benchmarks, so that tests
//! and the CLI start things the same way.

pub mod bench;
pub mod chaos;
pub mod components;
pub mod control_plane;
pub mod duration;
pub mod install;
pub mod status_server;
pub mod user_kubeconfig;
