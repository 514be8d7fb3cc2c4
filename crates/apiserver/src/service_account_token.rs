//! ServiceAccount tokens: TokenRequest, and the authenticator of the JWTs it and the token
//! controller issue. (Being built: until then no token is recognized.)

use crate::server::ApiServer;
use authz::UserInfo;

impl ApiServer {
    /// Authenticates a bearer token that is a ServiceAccount JWT: `None` when it is not one of
    /// this cluster's (another authenticator may know it), `Some(Err(reason))` when it is one
    /// but is not valid (expired, its ServiceAccount or bound pod gone): a 401.
    pub(crate) fn authenticate_service_account(
        &self,
        _token: &str,
    ) -> Option<Result<UserInfo, String>> {
        None
    }
}
