//! The Pod Security Standards, as upstream's `k8s.io/pod-security-admission` (v1.28) evaluates
//! them: the levels and versions of `api/`, the namespace labels that choose a policy, and every
//! check of `policy/check_*.go` with upstream's exact reasons and details.
//!
//! Pods are read as JSON (`metadata` and `spec` of a `v1.Pod` or a pod template), so the crate
//! needs no typed API and no server: the admission plugin feeds it what it stores.

mod checks;
mod evaluator;
mod level;
mod pod;
mod policy;
mod text;
mod verdict;

pub use evaluator::evaluate;
pub use level::{Level, LevelVersion, ParseError, Version};
pub use policy::{LabelError, Policy, labels};
pub use verdict::{Verdict, Violation};
