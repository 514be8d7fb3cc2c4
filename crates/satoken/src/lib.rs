//! ServiceAccount tokens as kube-apiserver signs and checks them.
//!
//! Two kinds of token carry a ServiceAccount's identity, both JWTs signed with the cluster's
//! service-account [`Key`]:
//! - bound tokens ([`BoundClaims`], upstream's `pkg/serviceaccount/claims.go`), issued by
//!   TokenRequest: they name audiences, expire, and may be bound to a Pod or Secret whose deletion
//!   invalidates them;
//! - legacy tokens ([`LegacyClaims`], upstream's `pkg/serviceaccount/legacy.go`), written into
//!   Secrets of type `kubernetes.io/service-account-token` by the token controller: no audience,
//!   no expiry, valid while the Secret holds them.
//!
//! This crate signs and verifies and checks the claims' own consistency (times, subject); whether
//! the ServiceAccount, Pod and Secret named still exist is the API server's part.

#![warn(missing_docs)]

mod claims;
mod key;

pub use claims::{Binding, BoundClaims, Kubernetes, LegacyClaims, ObjectRef, issuer_of};
pub use key::{Key, KeyError, VerifyError};

/// The issuer of bound tokens unless configured otherwise (kube-apiserver's
/// `--service-account-issuer` as kubeadm sets it).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The issuer of legacy (Secret-based) tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// The prefix of a ServiceAccount's username.
pub const USERNAME_PREFIX: &str = "system:serviceaccount:";

/// The group every ServiceAccount is in.
pub const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

/// The user extra that names the pod a token is bound to.
pub const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";

/// The user extra that holds the uid of the pod a token is bound to.
pub const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";

/// `system:serviceaccount:NAMESPACE:NAME`.
pub fn username(namespace: &str, name: &str) -> String {
    format!("{USERNAME_PREFIX}{namespace}:{name}")
}

/// The namespace and name in a ServiceAccount's username (upstream's `SplitUsername`, without
/// its name validation), `None` for any other username.
pub fn split_username(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix(USERNAME_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    if namespace.is_empty() || name.is_empty() || name.contains(':') {
        return None;
    }
    Some((namespace, name))
}

/// The groups of a ServiceAccount in `namespace`: `system:serviceaccounts` and
/// `system:serviceaccounts:NAMESPACE`.
pub fn groups(namespace: &str) -> Vec<String> {
    vec![
        ALL_SERVICE_ACCOUNTS_GROUP.to_string(),
        format!("{ALL_SERVICE_ACCOUNTS_GROUP}:{namespace}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_split_as_upstream() {
        assert_eq!(username("ns", "sa"), "system:serviceaccount:ns:sa");
        assert_eq!(
            split_username("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        for bad in [
            "system:serviceaccount:ns",
            "system:serviceaccount::sa",
            "system:serviceaccount:ns:",
            "system:serviceaccount:ns:a:b",
            "system:node:n1",
        ] {
            assert_eq!(split_username(bad), None, "{bad}");
        }
        assert_eq!(
            groups("ns"),
            vec!["system:serviceaccounts", "system:serviceaccounts:ns"]
        );
    }
}
