//! A Kubernetes-compatible API server over a [`store::Store`].

#![warn(missing_docs)]

pub mod discovery;
pub mod openapi;
pub mod resource;
pub mod table;
