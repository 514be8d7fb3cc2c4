//! The chain of filters in front of the routes, built in one place, in upstream's handler-chain
//! order (`DefaultBuildHandlerChain`): request info, authentication, impersonation, audit,
//! priority and fairness, the in-flight limit (with the watch cap), authorization. Each filter
//! is a function (a step that may answer the request, or a wrapper around the rest of the
//! chain); each caller of the server gets its chain by name as one function calling them, and a
//! filter a caller leaves out is left out there, with the reason.

use std::sync::Arc;

use axum::{
    Router,
    extract::{Request, State},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};

use super::{authentication, authorization, impersonation, request_info};
use crate::{context::Identity, inflight, state::ApiServer};

/// Who is calling, which decides the filters a request goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    /// A client over TLS: every filter.
    Remote,
    /// A component in this process that says who it is on each request ([`act_as`]): not
    /// authenticated (it holds no credentials to check: it is this process), but classified and
    /// queued by priority and fairness under its identity, as upstream's controller manager,
    /// scheduler and kubelets are as clients: the controllers' ServiceAccounts in `kube-system`
    /// at `workload-high`, the scheduler at `workload-high`, the nodes at `system` and
    /// `node-high`. Their watches are not capped (the cap protects the server from clients).
    Component,
    /// The server itself (upstream's loopback client, in `system:masters`): neither
    /// authenticated, impersonating, limited nor authorized, since `system:masters` is allowed
    /// everything before any authorizer is asked and its FlowSchema (`exempt`) is not limited.
    Loopback,
}

impl ApiServer {
    /// The routes behind the whole chain, for clients over TLS.
    pub fn router(&self) -> Router {
        self.chain(Caller::Remote)
    }

    /// The routes for a component in this process acting as `user` (a controller's
    /// ServiceAccount, the scheduler, a node): authorized as that user, as if it had presented
    /// its credentials over TLS, without the cost of crossing a socket.
    pub fn in_process_router_as(&self, user: authz::UserInfo) -> Router {
        let user = Arc::new(user);
        self.authorizing_router()
            .layer(middleware::from_fn(move |mut req: Request, next: Next| {
                act_as(&mut req, user.clone());
                next.run(req)
            }))
    }

    /// The routes for components in this process that say who they are with [`act_as`] on each
    /// request: one router for any number of identities (a cluster's thousands of simulated
    /// nodes).
    pub fn authorizing_router(&self) -> Router {
        self.chain(Caller::Component)
    }

    /// The routes for the server's own requests, as the server (`system:apiserver` in
    /// `system:masters`).
    pub fn in_process_router(&self) -> Router {
        self.chain(Caller::Loopback)
    }

    /// The routes behind the chain `caller` goes through: one layer, whose steps are each
    /// filter's function in upstream's order. One layer rather than one a filter: axum boxes a
    /// future and the rest of the stack for every layer a request passes, and seven of them
    /// were 3% of a rollout's CPU (`bench phases` and `bench api`, BENCHMARKS.md session 20).
    fn chain(&self, caller: Caller) -> Router {
        let routes = self.routes();
        match caller {
            Caller::Remote => routes.layer(middleware::from_fn_with_state(self.clone(), remote)),
            Caller::Component => {
                routes.layer(middleware::from_fn_with_state(self.clone(), component))
            }
            Caller::Loopback => routes.layer(middleware::from_fn(loopback)),
        }
    }
}

/// A client over TLS: request info, authentication, impersonation, audit (it sees who acts and
/// who impersonates: upstream audits before impersonation and records both), priority and
/// fairness, the in-flight limit, authorization.
async fn remote(State(s): State<ApiServer>, mut req: Request, next: Next) -> Response {
    request_info::insert(&mut req);
    if let Err(refused) = authentication::apply(&s, &mut req).await {
        return refused;
    }
    if let Err(refused) = impersonation::apply(&s, &mut req) {
        return *refused;
    }
    crate::audit::run(&s, req, |req| {
        crate::flowcontrol::run(&s, req, |req| {
            inflight::run(&s.in_flight, &s.metrics, req, |req| async {
                match authorization::check(&s, &req) {
                    Ok(()) => next.run(req).await,
                    Err(refused) => refused.into_response(),
                }
            })
        })
    })
    .await
}

/// A component in this process: the remote chain without authentication (it names itself with
/// [`act_as`]), audit (with an audit log, every controller write would be one more record than
/// upstream's controller manager, a separate client, makes through its own connection, which
/// is audited) and the in-flight limit (which protects the server from clients); its watches
/// are not capped.
async fn component(State(s): State<ApiServer>, mut req: Request, next: Next) -> Response {
    request_info::insert(&mut req);
    if let Err(refused) = impersonation::apply(&s, &mut req) {
        return *refused;
    }
    crate::flowcontrol::run(&s, req, |req| async {
        match authorization::check(&s, &req) {
            Ok(()) => next.run(req).await,
            Err(refused) => refused.into_response(),
        }
    })
    .await
}

/// The server itself, as `system:apiserver` in `system:masters`: allowed everything before any
/// authorizer is asked, exempt from priority and fairness, and not audited.
async fn loopback(mut req: Request, next: Next) -> Response {
    request_info::insert(&mut req);
    req.extensions_mut().insert(Identity {
        user: crate::context::loopback(),
        impersonator: None,
    });
    next.run(req).await
}

/// Marks an in-process request as made by `user`, for [`ApiServer::authorizing_router`].
pub fn act_as<B>(req: &mut http::Request<B>, user: Arc<authz::UserInfo>) {
    req.extensions_mut().insert(Identity {
        user,
        impersonator: None,
    });
}
