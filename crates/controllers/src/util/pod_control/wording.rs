//! The events a pod write records on its owner. The ReplicaSet, ReplicationController, DaemonSet
//! and Job controllers word them as upstream's `RealPodControl` (`Created pod: web-x2k4f`,
//! `Error creating: <status message>`); the StatefulSet controller as upstream's
//! `StatefulPodControl` (`create Pod web-0 in StatefulSet web successful`).

use events::EventType;

/// Which pod write an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// A pod created.
    Create,
    /// A pod deleted.
    Delete,
    /// A pod's images patched in place (rollwright's in-place update).
    InPlace,
}

/// Whose words an owner's pod events use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wording {
    /// Upstream's `RealPodControl`.
    Pods,
    /// Upstream's `StatefulPodControl`, for the StatefulSet of this name.
    StatefulSet(String),
}

impl Wording {
    /// The event for `write` of pod `pod` that succeeded (`Ok`) or failed with this message.
    pub fn event(
        &self,
        write: Write,
        pod: &str,
        result: Result<(), &str>,
    ) -> (EventType, &'static str, String) {
        let kind = if result.is_ok() {
            EventType::Normal
        } else {
            EventType::Warning
        };
        let reason = match (write, result.is_ok(), self) {
            (Write::Create, true, _) => "SuccessfulCreate",
            (Write::Create, false, _) => "FailedCreate",
            (Write::Delete, true, _) => "SuccessfulDelete",
            (Write::Delete, false, _) => "FailedDelete",
            (Write::InPlace, true, _) => "SuccessfulUpdatePodInPlace",
            (Write::InPlace, false, Wording::Pods) => "FailedUpdatePodInPlace",
            (Write::InPlace, false, Wording::StatefulSet(_)) => "FailedUpdate",
        };
        let message = match self {
            Wording::Pods => match (write, result) {
                (Write::Create, Ok(())) => format!("Created pod: {pod}"),
                (Write::Delete, Ok(())) => format!("Deleted pod: {pod}"),
                (Write::InPlace, Ok(())) => format!("Updated pod in place: {pod}"),
                (Write::Create, Err(e)) => format!("Error creating: {e}"),
                (Write::Delete, Err(e)) => format!("Error deleting: {e}"),
                (Write::InPlace, Err(e)) => format!("Error updating: {e}"),
            },
            Wording::StatefulSet(set) => {
                let verb = match write {
                    Write::Create => "create",
                    Write::Delete => "delete",
                    Write::InPlace => "update",
                };
                match (write, result) {
                    (Write::InPlace, Ok(())) => {
                        format!("update Pod {pod} in StatefulSet {set} in place successful")
                    }
                    (_, Ok(())) => format!("{verb} Pod {pod} in StatefulSet {set} successful"),
                    (_, Err(e)) => {
                        format!("{verb} Pod {pod} in StatefulSet {set} failed error: {e}")
                    }
                }
            }
        };
        (kind, reason, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_owner_keeps_its_upstream_words() {
        let sts = Wording::StatefulSet("web".into());
        let cases = [
            (
                Wording::Pods,
                Write::Create,
                Ok(()),
                "SuccessfulCreate",
                "Created pod: p",
            ),
            (
                Wording::Pods,
                Write::Create,
                Err("no"),
                "FailedCreate",
                "Error creating: no",
            ),
            (
                Wording::Pods,
                Write::Delete,
                Ok(()),
                "SuccessfulDelete",
                "Deleted pod: p",
            ),
            (
                Wording::Pods,
                Write::Delete,
                Err("no"),
                "FailedDelete",
                "Error deleting: no",
            ),
            (
                Wording::Pods,
                Write::InPlace,
                Ok(()),
                "SuccessfulUpdatePodInPlace",
                "Updated pod in place: p",
            ),
            (
                Wording::Pods,
                Write::InPlace,
                Err("no"),
                "FailedUpdatePodInPlace",
                "Error updating: no",
            ),
            (
                sts.clone(),
                Write::Create,
                Ok(()),
                "SuccessfulCreate",
                "create Pod p in StatefulSet web successful",
            ),
            (
                sts.clone(),
                Write::Create,
                Err("no"),
                "FailedCreate",
                "create Pod p in StatefulSet web failed error: no",
            ),
            (
                sts.clone(),
                Write::Delete,
                Ok(()),
                "SuccessfulDelete",
                "delete Pod p in StatefulSet web successful",
            ),
            (
                sts.clone(),
                Write::Delete,
                Err("no"),
                "FailedDelete",
                "delete Pod p in StatefulSet web failed error: no",
            ),
            (
                sts.clone(),
                Write::InPlace,
                Ok(()),
                "SuccessfulUpdatePodInPlace",
                "update Pod p in StatefulSet web in place successful",
            ),
            (
                sts,
                Write::InPlace,
                Err("no"),
                "FailedUpdate",
                "update Pod p in StatefulSet web failed error: no",
            ),
        ];
        for (wording, write, result, reason, message) in cases {
            let (kind, r, m) = wording.event(write, "p", result);
            assert_eq!((r, m.as_str()), (reason, message), "{wording:?} {write:?}");
            let want = if result.is_ok() {
                EventType::Normal
            } else {
                EventType::Warning
            };
            assert_eq!(kind, want, "{wording:?} {write:?}");
        }
    }
}
