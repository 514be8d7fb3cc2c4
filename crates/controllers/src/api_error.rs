//! What a failed API call says in a controller's events and conditions: for an API error, the
//! `Status` message the server wrote (`pods "web-0" is forbidden: exceeded quota: ...`), as
//! upstream's controllers print a `StatusError`; for anything else (the connection failed), the
//! error itself. Never kube's `Display` of an API error, which appends a debug dump of the
//! whole `Status`.

/// The message upstream's controllers would show for `e`.
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
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
