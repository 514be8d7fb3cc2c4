//! nodesim

#![warn(missing_docs)]
