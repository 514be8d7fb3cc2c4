//! What the request being served carries beyond its arguments: who made it.
//!
//! The authentication layer sets it for the request's task, as upstream's request context
//! carries `user.Info` down to admission; code serving the request reads it with [`user`].

use crate::error::{ApiError, ApiResult};
use authz::UserInfo;
use std::sync::Arc;

tokio::task_local! {
    static USER: Arc<UserInfo>;
}

/// The user of the request this task serves. Fails closed: code that runs outside a request
/// (or a request path that forgot to set its user) gets an internal error, never an identity,
/// so that no forgotten path runs as the cluster's administrator.
pub(crate) fn user() -> ApiResult<Arc<UserInfo>> {
    USER.try_with(Arc::clone)
        .map_err(|_| ApiError::internal("no authenticated user in the request's context"))
}

/// Runs `f` as `user`.
pub(crate) async fn scope<F: Future>(user: Arc<UserInfo>, f: F) -> F::Output {
    USER.scope(user, f).await
}

/// The API server's own identity, upstream's loopback client.
pub(crate) fn loopback() -> Arc<UserInfo> {
    Arc::new(UserInfo {
        username: "system:apiserver".into(),
        uid: String::new(),
        groups: vec![
            authz::MASTERS_GROUP.into(),
            authz::AUTHENTICATED_GROUP.into(),
        ],
        extra: Default::default(),
    })
}

/// Who a request is, as the request's extensions carry it from authentication on.
#[derive(Clone, Debug)]
pub(crate) struct Identity {
    /// The user the request acts as (after impersonation).
    pub user: Arc<UserInfo>,
    /// The authenticated user who impersonates `user`, if any.
    pub impersonator: Option<Arc<UserInfo>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn outside_a_request_there_is_no_user_not_an_administrator() {
        let e = user().unwrap_err();
        assert_eq!((e.code, e.reason), (500, "InternalError"));
        let inside = scope(loopback(), async { user() }).await.unwrap();
        assert_eq!(inside.username, "system:apiserver");
    }
}
