//! Who a request is, from its credentials, in upstream's order: a client certificate the
//! cluster CA signed, then a bearer token (the bootstrap admin token, then a ServiceAccount
//! token), and without credentials, `system:anonymous`.
//!
//! A request whose bearer token nobody recognizes is refused (401) rather than served as
//! anonymous, as upstream does: a client that sent a token meant to be somebody.

use crate::{
    context::Identity,
    error::ApiError,
    service_account_token::{Authenticated, api_audiences},
    state::ApiServer,
};
use authz::UserInfo;
use axum::{
    extract::Request,
    http::header,
    response::{IntoResponse, Response},
};
use std::sync::Arc;

/// The user a verified TLS client certificate names (CN the user, O the groups); the
/// connection puts it on each of its requests.
#[derive(Clone, Debug)]
pub(crate) struct ClientCertificate(pub Arc<UserInfo>);

/// The bootstrap admin's name, a member of `system:masters` (kubeadm's `kubernetes-admin`).
pub const ADMIN_USER: &str = "rollwright-admin";

/// The authentication step: puts the request's [`Identity`] in its extensions, or answers
/// the request (401) itself.
pub(crate) async fn apply(s: &ApiServer, req: &mut Request) -> Result<(), Response> {
    let user = match s.authenticate_request(req) {
        Ok(user) => user,
        Err(e) => {
            let certificate = req.extensions().get::<ClientCertificate>().is_some();
            let req = std::mem::take(req);
            return Err(crate::audit::failed_authentication(
                s,
                req,
                certificate,
                e.into_response(),
            )
            .await);
        }
    };
    // A connection that carried a user's request keeps its slot when the server is full.
    if user.username != authz::ANONYMOUS_USER
        && let Some(connection) = req.extensions().get::<crate::connection::Identified>()
    {
        connection.mark();
    }
    req.extensions_mut().insert(Identity {
        user,
        impersonator: None,
    });
    Ok(())
}

impl ApiServer {
    fn authenticate_request(&self, req: &Request) -> Result<Arc<UserInfo>, ApiError> {
        if let Some(ClientCertificate(user)) = req.extensions().get::<ClientCertificate>() {
            return Ok(with_authenticated_group(user.as_ref().clone()));
        }
        let bearer = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        match bearer {
            Some(token) => match self.authenticate_bearer(token, &[]) {
                Some(Ok(found)) => Ok(with_authenticated_group(found.user)),
                Some(Err(why)) => {
                    tracing::debug!(reason = %why, "bearer token refused");
                    Err(ApiError::unauthorized())
                }
                None => Err(ApiError::unauthorized()),
            },
            None => Ok(Arc::new(UserInfo::anonymous())),
        }
    }

    /// Who a bearer token meant for `audiences` (empty: the API server's own) names: `None`
    /// when no authenticator knows it, `Some(Err)` when one knows it and refuses it. The
    /// request pipeline and TokenReview ask the same authenticators.
    ///
    /// The bootstrap token has no audience of its own: it answers for the API server's
    /// audiences only, as upstream's `WrapAudienceAgnosticToken` does.
    pub(crate) fn authenticate_bearer(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Option<Result<Authenticated, String>> {
        if let Some(admin) = &self.token
            && constant_time_eq(token.as_bytes(), admin.as_bytes())
        {
            let own = api_audiences();
            let wanted: Vec<String> = if audiences.is_empty() {
                own
            } else {
                audiences
                    .iter()
                    .filter(|a| own.contains(a))
                    .cloned()
                    .collect()
            };
            if wanted.is_empty() {
                return Some(Err(
                    "token audiences is invalid for the target audiences".into()
                ));
            }
            return Some(Ok(Authenticated {
                user: UserInfo::new(ADMIN_USER, &[authz::MASTERS_GROUP]),
                audiences: wanted,
            }));
        }
        self.verify_service_account_token(token, audiences)
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme is case-insensitive).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Every authenticated user is in `system:authenticated` (upstream's `AuthenticatedGroupAdder`).
fn with_authenticated_group(mut user: UserInfo) -> Arc<UserInfo> {
    if !user.in_group(authz::AUTHENTICATED_GROUP) {
        user.groups.push(authz::AUTHENTICATED_GROUP.to_string());
    }
    Arc::new(user)
}

/// Compares a presented token with the expected one in time that depends only on the expected
/// token's length, so that timing tells an attacker nothing about how much of a guess was right.
fn constant_time_eq(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = given.len() ^ expected.len();
    for (i, e) in expected.iter().enumerate() {
        diff |= usize::from(given.get(i).copied().unwrap_or(0) ^ e);
    }
    diff == 0
}

/// The user a client certificate names: CN the user, each O a group, as upstream's x509
/// authenticator reads it. `None` for a certificate without a CN or with an empty one: upstream's
/// `CommonNameUserConversion` then answers "not authenticated" rather than user `""`, and the
/// request's bearer token (or anonymity) decides who it is.
pub(crate) fn certificate_user(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()
        .filter(|cn| !cn.is_empty())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect();
    Some(UserInfo {
        username: name,
        groups,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_when_equal() {
        let cases: &[(&str, bool)] = &[
            ("s3cret-token", true),
            ("s3cret-tokeN", false),
            ("s3cret-toke", false),
            ("s3cret-token-", false),
            ("", false),
            ("x3cret-token", false),
        ];
        for (given, want) in cases {
            assert_eq!(
                constant_time_eq(given.as_bytes(), b"s3cret-token"),
                *want,
                "{given}"
            );
        }
    }

    fn certificate(cn: &str, groups: &[&str]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().expect("a key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        for g in groups {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *g);
        }
        params
            .self_signed(&key)
            .expect("a certificate")
            .der()
            .to_vec()
    }

    #[test]
    fn a_certificate_names_its_cn_and_an_empty_cn_names_nobody() {
        let user = certificate_user(&certificate("alice", &["devs"])).expect("a user");
        assert_eq!(user.username, "alice");
        assert_eq!(user.groups, ["devs"]);
        // No ClientCertificate is put on the connection, so its bearer token decides.
        assert!(certificate_user(&certificate("", &["system:masters"])).is_none());
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
    }
}
