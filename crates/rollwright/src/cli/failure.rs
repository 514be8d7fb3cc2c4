//! Turning client errors into one line that says what went wrong and how to fix it, as the
//! house rule for the CLI asks: the server's refusal with its field causes, or the transport's
//! root cause with where the address came from.

use super::kubeconfig::Session;
use kube::core::Status;

/// The deepest cause of an error: for a refused connection that is the OS's "Connection refused",
/// not the client's "ServiceError: client error (Connect)".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// The one-line explanation of a refusal by the server.
pub fn refusal(status: &Status, namespace: Option<&str>) -> String {
    let details = status.details.as_ref();
    match (status.code, status.reason.as_str()) {
        (404, _) => {
            let resource = details.map_or(String::new(), |d| {
                if d.group.is_empty() {
                    d.kind.clone()
                } else {
                    format!("{}.{}", d.kind, d.group)
                }
            });
            let mut line = status.message.clone();
            if let Some(ns) = namespace {
                line.push_str(&format!(" in namespace {ns:?}"));
            }
            if !resource.is_empty() {
                let ns = namespace.map_or(String::new(), |ns| format!(" -n {ns}"));
                line.push_str(&format!(
                    " (list them with `rollwright get {resource}{ns}`)"
                ));
            }
            line
        }
        (422, _) | (_, "Invalid") => {
            let causes: Vec<String> = details
                .map(|d| {
                    d.causes
                        .iter()
                        .map(|c| {
                            if c.field.is_empty() {
                                c.message.clone()
                            } else {
                                format!("{}: {}", c.field, c.message)
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            let what = details.map_or(String::new(), |d| {
                let kind = if d.group.is_empty() {
                    d.kind.clone()
                } else {
                    format!("{}.{}", d.kind, d.group)
                };
                format!("{kind} {:?} is invalid", d.name)
            });
            match (what.is_empty(), causes.is_empty()) {
                (false, false) => format!("{what}: {} (fix these fields)", causes.join("; ")),
                _ => format!("{} (fix the object and try again)", status.message),
            }
        }
        (401, _) => format!(
            "{} (the credentials in the kubeconfig were refused; is it for this server?)",
            status.message
        ),
        (403, _) => format!(
            "{} (ask for access, or use another --context)",
            status.message
        ),
        (409, "AlreadyExists") => format!("{} (delete it first, or use `apply`)", status.message),
        (409, _) => format!(
            "{} (the object changed meanwhile; run the command again)",
            status.message
        ),
        _ => status.message.clone(),
    }
}

/// Explains a client error met while talking to the cluster of `session`.
pub fn explain(e: kube::Error, session: &Session, namespace: Option<&str>) -> anyhow::Error {
    let line = match &e {
        kube::Error::Api(status) => refusal(status, namespace),
        kube::Error::HyperError(_) | kube::Error::Service(_) => format!(
            "cannot reach the API server at {}: {} (is it running? `rollwright up` starts one; \
             the address is from {}, choose another with --kubeconfig or --context)",
            session.server,
            root_cause(&e),
            session.source
        ),
        kube::Error::Auth(_) => format!(
            "cannot authenticate to {}: {} (check the user in {})",
            session.server,
            root_cause(&e),
            session.source
        ),
        _ => format!("talking to {}: {}", session.server, root_cause(&e)),
    };
    anyhow::anyhow!(line)
}

/// `explain` as a `map_err` adaptor.
pub trait Explain<T> {
    /// Explains the error, naming `namespace` for a missing object.
    fn explain(self, session: &Session, namespace: Option<&str>) -> anyhow::Result<T>;
}

impl<T> Explain<T> for Result<T, kube::Error> {
    fn explain(self, session: &Session, namespace: Option<&str>) -> anyhow::Result<T> {
        self.map_err(|e| explain(e, session, namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(v: serde_json::Value) -> Status {
        serde_json::from_value(v).expect("a Status")
    }

    #[test]
    fn refusals_read_as_one_line_with_the_fix() {
        let not_found = status(json!({
            "code": 404, "reason": "NotFound", "message": "deployments.apps \"web\" not found",
            "details": {"name": "web", "group": "apps", "kind": "deployments"}
        }));
        assert_eq!(
            refusal(&not_found, Some("prod")),
            "deployments.apps \"web\" not found in namespace \"prod\" \
             (list them with `rollwright get deployments.apps -n prod`)"
        );
        let invalid = status(json!({
            "code": 422, "reason": "Invalid", "message": "Deployment.apps \"web\" is invalid: ...",
            "details": {"name": "web", "group": "apps", "kind": "Deployment", "causes": [
                {"reason": "FieldValueInvalid", "field": "spec.replicas",
                 "message": "Invalid value: -1: must be greater than or equal to 0"},
                {"reason": "FieldValueRequired", "field": "spec.template.spec.containers[0].image",
                 "message": "Required value"}
            ]}
        }));
        assert_eq!(
            refusal(&invalid, None),
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be \
             greater than or equal to 0; spec.template.spec.containers[0].image: Required value \
             (fix these fields)"
        );
        let conflict = status(json!({"code": 409, "reason": "Conflict", "message": "modified"}));
        assert!(refusal(&conflict, None).ends_with("run the command again)"));
    }
}
