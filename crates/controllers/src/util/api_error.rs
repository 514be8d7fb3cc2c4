//! What a failed API call says in a controller's events and conditions: for an API error, the
//! `Status` message the server wrote (`pods "web-0" is forbidden: exceeded quota: ...`), as
//! upstream's controllers print a `StatusError`; for anything else (the connection failed), the
//! error itself. Never kube's `Display` of an API error, which appends a debug dump of the
//! whole `Status`. And the questions controllers ask of a failed call.

/// The message upstream's controllers would show for `e`.
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Whether an API error is a `Status` with this HTTP code (404 gone, 409 conflict or exists).
pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Whether `e` is the NamespaceLifecycle admission's refusal of new content in a namespace being
/// deleted: by its cause (upstream's `NamespaceTerminatingCause`), or by its message where a
/// server gives no cause.
pub fn is_namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if namespace_terminating(s))
}

/// [`is_namespace_terminating`] of a `Status`.
pub fn namespace_terminating(s: &kube::core::Status) -> bool {
    s.code == 403
        && (s
            .details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
            || s.message.contains("because it is being terminated"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_is_its_status_message() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "message": "pods \"x\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1",
            "reason": "Forbidden",
            "code": 403
        }))
        .unwrap();
        let e = kube::Error::Api(Box::new(status));
        assert_eq!(
            message(&e),
            "pods \"x\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"
        );
        // What the events said before: kube's Display of the same error.
        assert!(e.to_string().contains("Status {"), "{e}");
    }
}
