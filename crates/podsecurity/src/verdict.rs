//! What the checks found (upstream's `CheckResult` and `AggregateCheckResult`).

/// One failed check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// A short name of what is wrong, e.g. `host namespaces`.
    pub reason: String,
    /// Which fields and values, e.g. `hostNetwork=true` (may be empty).
    pub detail: String,
}

impl Violation {
    pub(crate) fn new(reason: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            detail: detail.into(),
        }
    }
}

/// Every failed check of one evaluation, in upstream's check order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The failed checks.
    pub violations: Vec<Violation>,
}

impl Verdict {
    /// Whether the pod passes.
    pub fn allowed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The reasons, comma-separated: the per-pod summary of a namespace's new enforce level.
    pub fn forbidden_reason(&self) -> String {
        let reasons: Vec<&str> = self.violations.iter().map(|v| v.reason.as_str()).collect();
        reasons.join(", ")
    }

    /// Each reason with its detail in parentheses, comma-separated: the text after
    /// `violates PodSecurity "<level>:<version>": `.
    pub fn forbidden_detail(&self) -> String {
        let parts: Vec<String> = self
            .violations
            .iter()
            .map(|v| {
                if v.detail.is_empty() {
                    v.reason.clone()
                } else {
                    format!("{} ({})", v.reason, v.detail)
                }
            })
            .collect();
        parts.join(", ")
    }
}
