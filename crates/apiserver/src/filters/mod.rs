//! The request's way through the server before it reaches the registry, one layer a job, in
//! upstream's handler-chain order: request info, authentication, impersonation, audit,
//! max-in-flight, authorization; built for each kind of caller in one place, [`chain`]. Each layer reads what the ones before it put in the request's extensions
//! ([`crate::context::Identity`]) and adds nothing to the others' modules.

pub(crate) mod authentication;
pub(crate) mod authorization;
pub(crate) mod chain;
pub(crate) mod impersonation;
pub(crate) mod request_info;
