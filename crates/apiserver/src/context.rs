//! What the request being served carries beyond its arguments: who made it.
//!
//! The authentication layer sets it for the request's task, as upstream's request context
//! carries `user.Info` down to admission; code serving the request reads it with [`user`].

use authz::UserInfo;
use std::sync::Arc;

tokio::task_local! {
    static USER: Arc<UserInfo>;
}

/// The user of the request this task serves; the API server's own identity
/// (`system:apiserver`, in `system:masters`) for work outside any request.
pub(crate) fn user() -> Arc<UserInfo> {
    USER.try_with(Arc::clone).unwrap_or_else(|_| loopback())
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
