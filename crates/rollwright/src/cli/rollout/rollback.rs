//! The automatic rollback a workload records ([`controllers::autorollback`]), read from its
//! annotations and `RolledBack` condition. A leaf of its own because the plain-data model
//! (`model::WorkloadView`) carries it and every command that tells it (`history`, `status`,
//! `watch`) reads it from there.

use controllers::autorollback::{
    CONDITION, ROLLBACK_MESSAGE, ROLLBACK_REASON, ROLLED_BACK_AT, ROLLED_BACK_FROM,
};
use serde_json::Value;

/// The automatic rollback a workload records: the annotations its controller wrote and its
/// `RolledBack` condition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollback {
    /// The template hash rolled back from (its revision's key for a Deployment or DaemonSet).
    pub from: String,
    /// The reason (`ProgressDeadlineExceeded`, `ImagePullFailure`, `CrashLoop`).
    pub reason: String,
    /// When.
    pub at: String,
    /// What it did.
    pub message: String,
    /// What happened after (`RollbackSuppressed`, `RollbackFailed`, with the message), if the
    /// condition turned `False`.
    pub since: Option<String>,
}

impl Rollback {
    /// The rollback `obj` (a workload as JSON) records, if any.
    pub fn of(obj: &Value) -> Option<Rollback> {
        let annotation = |k: &str| {
            obj.pointer("/metadata/annotations")
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let message = annotation(ROLLBACK_MESSAGE)?;
        let since = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c["type"] == CONDITION && c["status"] == "False")
            .map(|c| {
                format!(
                    "{}: {}",
                    c["reason"].as_str().unwrap_or(""),
                    c["message"].as_str().unwrap_or("")
                )
            });
        Some(Rollback {
            from: annotation(ROLLED_BACK_FROM).unwrap_or_default(),
            reason: annotation(ROLLBACK_REASON).unwrap_or_default(),
            at: annotation(ROLLED_BACK_AT).unwrap_or_default(),
            message,
            since,
        })
    }

    /// One line for people, with a second when something happened since.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "automatic rollback at {} ({}): {}",
            self.at, self.reason, self.message
        );
        if let Some(since) = &self.since {
            out.push_str(&format!("\nsince then: {since}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_automatic_rollback_is_read_and_told() {
        let obj = json!({
            "metadata": {"annotations": {
                ROLLED_BACK_FROM: "h2", ROLLBACK_REASON: "CrashLoop",
                ROLLED_BACK_AT: "2025-01-01T00:01:00Z",
                ROLLBACK_MESSAGE: "rolled back from revision 2 (h2) to revision 1 (h1): 1 pod(s) are crash-looping"}},
            "status": {"conditions": [{"type": "RolledBack", "status": "True", "reason": "CrashLoop"}]},
        });
        let rollback = Rollback::of(&obj).expect("a rollback");
        assert_eq!(rollback.from, "h2");
        assert_eq!(
            rollback.describe(),
            "automatic rollback at 2025-01-01T00:01:00Z (CrashLoop): rolled back from revision 2 \
             (h2) to revision 1 (h1): 1 pod(s) are crash-looping"
        );
        let mut failed = obj.clone();
        failed["status"]["conditions"][0] = json!({"type": "RolledBack", "status": "False",
            "reason": "RollbackFailed", "message": "revision 3 (h1) failed too"});
        assert!(
            Rollback::of(&failed)
                .expect("a rollback")
                .describe()
                .ends_with("\nsince then: RollbackFailed: revision 3 (h1) failed too")
        );
        assert_eq!(Rollback::of(&json!({"metadata": {}})), None);
    }
}
