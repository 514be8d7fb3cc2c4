//! controllers

#![warn(missing_docs)]
