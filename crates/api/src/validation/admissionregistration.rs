//! admissionregistration.k8s.io/v1 webhook configurations (upstream's
//! `pkg/apis/admissionregistration/validation/validation.go` `validateWebhookClientConfig`, and
//! `ValidateWebhookURL` in `k8s.io/apiserver/pkg/util/webhook/validation.go`): each webhook is
//! reached by exactly one of a URL or a Service, and a URL is `https://host[/path]` with no user
//! information (it would be stored, and shown to every reader of the configuration), query or
//! fragment.

use super::{items, meta, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// A Mutating- or ValidatingWebhookConfiguration.
pub fn validate_webhook_configuration(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_cluster_scoped(obj);
    for (i, hook) in items(obj, "webhooks").iter().enumerate() {
        let path = Path::new("webhooks").index(i).child("clientConfig");
        let config = hook.get("clientConfig").unwrap_or(&Value::Null);
        let url = str_field(config, "url");
        let service = config.get("service").filter(|s| !s.is_null());
        if url.is_some() == service.is_some() {
            errs.push(FieldError::required(
                path.child("url"),
                "exactly one of url or service is required",
            ));
        }
        if let Some(url) = url {
            errs.extend(validate_webhook_url(&path.child("url"), url));
        }
    }
    errs
}

/// The parts of a URL upstream's checks read, split as Go's `url.Parse` splits them.
struct Url<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

fn parse(url: &str) -> Url<'_> {
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let is_scheme = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    };
    let (scheme, rest) = match rest.split_once(':') {
        Some((scheme, rest)) if is_scheme(scheme) => (scheme, rest),
        _ => ("", rest),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (user, host) = match rest.strip_prefix("//") {
        Some(after) => {
            let authority = after.split('/').next().unwrap_or_default();
            match authority.rsplit_once('@') {
                Some((user, host)) => (Some(user), host),
                None => (None, authority),
            }
        }
        None => (None, ""),
    };
    Url {
        scheme,
        user,
        host,
        query,
        fragment,
    }
}

/// Upstream's `ValidateWebhookURL` with `forceHttps`.
fn validate_webhook_url(path: &Path, url: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = parse(url);
    let mut errs = Vec::new();
    if u.scheme != "https" {
        errs.push(FieldError::invalid(
            path.clone(),
            Value::from(u.scheme),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            Value::from(u.host),
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = u.user {
        errs.push(FieldError::invalid(
            path.clone(),
            Value::from(user),
            "user information is not permitted in the URL",
        ));
    }
    if !u.fragment.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            Value::from(u.fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !u.query.is_empty() {
        errs.push(FieldError::invalid(
            path.clone(),
            Value::from(u.query),
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(client: Value) -> Vec<String> {
        let obj = json!({"metadata": {"name": "hooks"},
            "webhooks": [{"name": "a.example.com", "clientConfig": client}]});
        validate_webhook_configuration(&obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn webhook_urls_are_https_without_user_information() {
        let at = "webhooks[0].clientConfig.url";
        let cases = [
            (json!({"url": "https://127.0.0.1:8443/hook"}), vec![]),
            (
                json!({"service": {"namespace": "ns", "name": "svc"}}),
                vec![],
            ),
            (
                json!({"url": "http://127.0.0.1/hook"}),
                vec![format!(
                    "{at}: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
                )],
            ),
            (
                json!({"url": "https://user:pw@127.0.0.1/"}),
                vec![format!(
                    "{at}: Invalid value: \"user:pw\": user information is not permitted in the URL"
                )],
            ),
            (
                json!({"url": "https://127.0.0.1/?a=b#f"}),
                vec![
                    format!("{at}: Invalid value: \"f\": fragments are not permitted in the URL"),
                    format!(
                        "{at}: Invalid value: \"a=b\": query parameters are not permitted in the URL"
                    ),
                ],
            ),
            (
                json!({}),
                vec![format!(
                    "{at}: Required value: exactly one of url or service is required"
                )],
            ),
        ];
        for (client, want) in cases {
            assert_eq!(messages(client.clone()), want, "{client}");
        }
    }
}
