//! scheduler

#![warn(missing_docs)]
