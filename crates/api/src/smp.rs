//! smp
