//! selector
