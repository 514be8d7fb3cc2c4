//! defaults
